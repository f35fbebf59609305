"""A sweep's axes as the command line writes them."""

import pytest

from vramsim.errors import ConfigError
from vramsim.search.sweep_grid import axis_values, parse_names, parse_values


def test_a_list_and_ranges() -> None:
    """Lists, arithmetic and multiplying ranges, both ends included where the step lands on them."""
    assert parse_values("8,1,2,4,2", "batch_size") == (1, 2, 4, 8)
    assert parse_values("512:32768:x2", "seq_len") == (512, 1024, 2048, 4096, 8192, 16384, 32768)
    assert parse_values("512:3000:x2", "seq_len") == (512, 1024, 2048)
    assert parse_values("1:10:4", "batch_size") == (1, 5, 9)
    assert parse_values("1:3,16", "batch_size") == (1, 2, 3, 16)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0,1", "'0' is not a whole number"),
        ("8:4", r"ends \(4\) before it starts \(8\)"),
        ("1:8:x1", "x2 or more"),
        ("1:2:3:4", "start:stop or start:stop:step"),
        ("1:1000000", "more than 100,000 values"),
    ],
)
def test_bad_values_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_values(text, "seq_len")


def test_names_and_python_values() -> None:
    """Devices and checkpointing choices are names; Python passes values or sequences as they are."""
    assert parse_names("h100, a100-80gb,h100", "device") == ("h100", "a100-80gb")
    assert axis_values("none,every:2", "checkpointing") == ("none", "every:2")
    assert axis_values(range(4, 0, -1), "batch_size") == (1, 2, 3, 4)
    assert axis_values(2, "gpus") == (2,)
    with pytest.raises(ConfigError, match="empty item"):
        parse_names("h100,", "device")
