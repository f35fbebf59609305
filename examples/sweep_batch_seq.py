"""How large a batch and how long a sequence can GPT-2 train with on a 12 GB RTX 3060?

A grid of 4 batch sizes x 8 lengths: vramsim traces points of it, derives the others where it proves that every
size of the traced program is a polynomial in the batch size and the length (the allocator replayed at each point),
and says which point was which. Traced here in this process (``jobs=1``); by default the traces run in worker processes.
"""

from __future__ import annotations

import vramsim
from vramsim import format_bytes


def main() -> None:
    found = vramsim.sweep("gpt2", batch_size="2:8:2", seq_len="128:1024:128", device="rtx-3060", jobs=1)
    derived = sum(point.answer == "derived" for point in found.points)
    print(f"{len(found.points)} points: {found.traces} traced, {derived} derived")
    for device in dict.fromkeys(point.device for point in found.points):
        best = next((point for point in found.largest if point.device == device), None)
        if best is None:
            print(f"Answer: on {device} none of the points fits")
        else:
            print(
                f"Answer: on {device} the largest that fits is batch {best.batch_size} x {best.seq_len} tokens, "
                f"{format_bytes(best.device_bytes or 0)} of {format_bytes(best.usable_bytes or 0)} usable ({best.answer})"
            )


if __name__ == "__main__":
    main()
