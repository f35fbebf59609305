"""Checkpoint files on disk, and the device memory of saving and restoring them."""
