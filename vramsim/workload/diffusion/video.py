"""What the video pipelines share after the decode: ``postprocess_video``'s device part."""

from __future__ import annotations

import torch

__all__ = ["postprocess_video"]


def postprocess_video(video: torch.Tensor, vae_scale_factor: int) -> torch.Tensor:
    """``VideoProcessor.postprocess_video``: each video's frames denormalized in turn, each going to the host before
    the next; the last one's frames, on the device until their host copy."""
    from diffusers.video_processor import VideoProcessor

    processor = VideoProcessor(vae_scale_factor=vae_scale_factor)
    frames = video
    for index in range(video.shape[0]):
        frames = processor.postprocess(video[index].permute(1, 0, 2, 3), output_type="pt")
    return frames
