"""The one number formatter: 3–4 significant digits, units from keys, lists summarised."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from toolkit._utils.formatting import LIST_ITEMS, fmt, format_value, round_floats, unit_of

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def significant_digits(text: str) -> int:
    """The most significant digits of any number written in ``text`` (exponents aside)."""
    mantissas = NUMBER.findall(re.sub(r"e[-+]?\d+", "", text))
    return max(len(m.replace(".", "").lstrip("0")) for m in mantissas)


@pytest.mark.parametrize("value", [1.031766009675882, 123456.789, 1e-9 / 3, -2 / 3,
                                   np.float32(0.1234567), torch.tensor(2 / 3).item()])
def test_a_float_has_at_most_four_significant_digits(value: float) -> None:
    text = format_value(value)
    assert significant_digits(text) <= 4, text


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("peak_bytes", 1059636, "1.011 MiB"),
    ("graph_bytes", 512, "512 B"),
    ("timers.fit", 0.25, "250 ms"),
    ("wall_seconds", 12.345678, "12.35 s"),
    ("time_ratio", 0.5, "0.5"),
    ("seed", 123456, "123456"),
])
def test_the_key_gives_the_unit(key: str, value: float, expected: str) -> None:
    assert format_value(value, key) == expected


def test_a_list_of_byte_counts_is_written_in_binary_units() -> None:
    assert format_value([223792, 664112, 1194032], "bytes") == \
        "[218.5 KiB, 648.5 KiB, 1.139 MiB]"


def test_a_long_list_shows_its_ends_and_its_length() -> None:
    values = list(np.linspace(0, 1, 50).tolist())
    text = format_value(values)
    assert text == "[0, 0.02041, 0.04082, …, 1] (50 values)"
    assert len(format_value(values[:LIST_ITEMS]).split(",")) == LIST_ITEMS


def test_nested_records_are_rounded_but_counts_stay_whole() -> None:
    record = {"wall_seconds": 1.031766009675882, "seeds": [0, 1, 2], "n": 123456,
              "inner": {"x": [0.123456789, 2.5]}}
    assert round_floats(record) == {"wall_seconds": 1.032, "seeds": [0, 1, 2], "n": 123456,
                                    "inner": {"x": [0.1235, 2.5]}}


def test_missing_values_and_infinities() -> None:
    assert fmt(None) == fmt(float("nan")) == "n/a"
    assert fmt(float("inf"), "s") == "∞ s" and fmt(-float("inf")) == "−∞"
    assert format_value(None) == "—" and format_value(True) == "yes"
    assert unit_of("max_bytes_per_step") == "B"
