"""A target's kernel rules on meta tensors: SDPA backends, autocast, scratch buffers and layouts."""
