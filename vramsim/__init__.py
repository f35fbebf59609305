"""vramsim: predict the GPU memory of a PyTorch job before it reaches a GPU."""
