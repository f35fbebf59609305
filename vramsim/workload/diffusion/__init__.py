"""Diffusion pipelines (diffusers) as programs: generation and a denoiser's training step."""
