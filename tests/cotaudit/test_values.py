"""The shared checks of user-written numbers, and values shown in the user's terms."""

from __future__ import annotations

import argparse
import datetime
import math
from typing import Any

import pytest

from cotaudit.constants import INT_MAX, INT_MIN
from cotaudit.errors import UsageError
from cotaudit.flags import integer_flag, number_flag
from cotaudit.values import integer, number, shown


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "no value"),
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (-2, "-2"),
        (10**60, "an integer of 61 digits"),
        (0.5, "0.5"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        ("fast", 'the string "fast"'),
        ('say "hi"\n', 'the string "say \\"hi\\"\\n"'),
        ("x" * 41, "a string of 41 characters"),
        (["nope"], 'the list ["nope"]'),
        ([1, True, "a"], 'the list [1, true, "a"]'),
        (["x" * 30, "y" * 30], "a list of 2 items"),
        ([[1, 2], []], "the list [[1, 2], []]"),
        ({"a": 1}, "a table"),
        (datetime.date(1979, 5, 27), "the date 1979-05-27"),
        (datetime.datetime(1979, 5, 27, 7, 32), "the date-time 1979-05-27T07:32:00"),
        (datetime.time(7, 32), "the time 07:32:00"),
    ],
)
def test_a_value_is_shown_as_toml_writes_it(value: Any, text: str) -> None:
    assert shown(value) == text


def test_json_values_are_named_in_json_terms() -> None:
    assert shown({"a": 1}, json=True) == "an object"
    assert shown(None, json=True) == "null"
    assert shown(["a"], json=True) == 'the list ["a"]'


@pytest.mark.parametrize(
    ("value", "bounds", "message"),
    [
        (math.nan, {"positive": True}, "'k' must be a finite number > 0, got nan"),
        (math.inf, {"positive": True}, "'k' must be a finite number > 0, got inf"),
        (-math.inf, {"low": 0.0}, "'k' must be a finite number >= 0, got -inf"),
        (math.nan, {"low": 0.0, "high": 1.0}, "'k' must be a finite number in [0, 1], got nan"),
        (0, {"positive": True}, "'k' must be a number > 0, got 0"),
        (-1, {"low": 0.0}, "'k' must be a number >= 0, got -1"),
        (1.5, {"low": 0.0, "high": 1.0}, "'k' must be a number in [0, 1], got 1.5"),
        (True, {}, "'k' must be a number, got true"),
        ("fast", {}, "'k' must be a number, got the string \"fast\""),
        (
            10**30,
            {"positive": True},
            "'k' must be a number > 0, got 1000000000000000000000000000000",
        ),
    ],
)
def test_number_refuses_what_the_runner_cannot_use(
    value: Any, bounds: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as info:
        number(value, name="'k'", where="cfg.toml: k", fix="Set k = 1.", **bounds)
    assert str(info.value) == f"cfg.toml: k: {message}. Set k = 1."


def test_number_takes_integers_and_bounds_inclusive() -> None:
    assert number(120, name="'k'", where="w", fix="f", positive=True) == 120.0
    assert number(0, name="'k'", where="w", fix="f", low=0.0) == 0.0
    assert number(1, name="'k'", where="w", fix="f", low=0.0, high=1.0) == 1.0


@pytest.mark.parametrize(
    ("value", "bounds", "message"),
    [
        (2**63, {}, f"an integer in [{INT_MIN}, {INT_MAX}] (64 bits), got {2**63}"),
        (-(2**63) - 1, {}, f"an integer in [{INT_MIN}, {INT_MAX}] (64 bits), got {-(2**63) - 1}"),
        (10**24, {"low": 1}, f"an integer >= 1 and <= {INT_MAX} (64 bits), got {10**24}"),
        (0, {"low": 1}, "an integer >= 1, got 0"),
        (2.0, {"low": 1}, "an integer >= 1, got 2.0"),
        (math.inf, {"low": 1}, "an integer >= 1, got inf"),
        (False, {}, "an integer, got false"),
        ([1], {}, "an integer, got the list [1]"),
        (11, {"low": 0, "high": 9}, "an integer in [0, 9], got 11"),
    ],
)
def test_integer_refuses_floats_and_what_does_not_fit_in_64_bits(
    value: Any, bounds: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as info:
        integer(value, name="'seed'", where="cfg.toml: seed", fix="Set seed = 1.", **bounds)
    assert str(info.value) == f"cfg.toml: seed: 'seed' must be {message}. Set seed = 1."


def test_integer_accepts_the_64_bit_range_and_names_an_alternative() -> None:
    assert integer(INT_MAX, name="'s'", where="w", fix="f") == INT_MAX
    assert integer(INT_MIN, name="'s'", where="w", fix="f") == INT_MIN
    with pytest.raises(UsageError, match=r'must be "auto" or an integer >= 1, got 0'):
        integer(0, name="'c'", where="w", fix="f", low=1, alternative='"auto"')


def test_flag_types_refuse_with_the_text_as_typed() -> None:
    seconds = number_flag(positive=True, fix="give e.g. 30")
    assert seconds("2.5") == 2.5
    for text, got in (("nan", "nan"), ("1e999", "1e999"), ("0", "0"), ("soon", "soon")):
        with pytest.raises(argparse.ArgumentTypeError) as info:
            seconds(text)
        assert str(info.value).endswith(f", got {got}; give e.g. 30")
    count = integer_flag(low=1)
    assert count("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be an integer >= 1, got 1\.5; "):
        count("1.5")
    with pytest.raises(
        argparse.ArgumentTypeError, match=r"\(64 bits\), got 9{40}; give an integer"
    ):
        count("9" * 40)
    with pytest.raises(argparse.ArgumentTypeError, match="got 41 characters"):
        count("9" * 41)
