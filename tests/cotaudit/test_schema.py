"""The stream's record types: docs/schema.md lists exactly their fields, and the one validator
refuses a record of the wrong shape naming where and which field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION, validate_record
from cotaudit.schema.records import (
    PROBLEM_RECORD_TYPES,
    RECORD_TYPES,
    ProntoQAProblemRecord,
    ResponseRecord,
    field_names,
)
from tests.stream_records import response_record

DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"


def _documented_fields(type_name: str) -> list[str]:
    """The first column of the field tables in the section of docs/schema.md naming
    ``type_name`` (a section runs to the next heading of the same or a higher level)."""
    text = DOC.read_text(encoding="utf-8")
    heading = re.search(rf"^(#+) .*`{type_name}`.*$", text, re.M)
    assert heading is not None, f"docs/schema.md has no section naming {type_name}"
    level = len(heading.group(1))
    rest = text[heading.end() :]
    following = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    section = rest[: following.start()] if following else rest
    return re.findall(r"^\| `(\w+)` \|", section, re.M)


@pytest.mark.parametrize(
    "typed", [*PROBLEM_RECORD_TYPES.values(), *RECORD_TYPES.values()], ids=lambda t: t.__name__
)
def test_docs_list_exactly_the_fields_of_each_record_type(typed: type) -> None:
    documented = _documented_fields(typed.__name__)
    if typed.__name__ in ("RequestRecord", "ResponseRecord"):
        # One section: the request fields, then a table of the response-only fields.
        assert documented == list(field_names(ResponseRecord))
        assert set(field_names(typed)) <= set(documented)
    else:
        assert documented == list(field_names(typed))


def _problem() -> dict[str, Any]:
    problem = Problem(
        problem_id="q1",
        premises=(Premise("P1", "Bempuses are bimpuses"), Premise("P2", "Alex is a bempus")),
        question="Is Alex a bimpus?",
        answer=True,
        proof=(ProofStep(1, "is(alex, bimpus)", ("P2", "P1")),),
    )
    return problem.to_record()


def test_records_the_runner_writes_are_valid() -> None:
    validate_record(_problem(), where="here")
    validate_record(response_record(), where="here")
    validate_record(response_record(text=None, error=_error()), where="here")


def _error() -> dict[str, Any]:
    return {"type": "ServerError", "status": 503, "message": "down", "body": None, "attempts": 8}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"text": 17}, "'text' must be a string or null, not the number 17"),
        ({"text": ["a"]}, "'text' must be a string or null, not a list"),
        ({"text": {"a": 1}}, "'text' must be a string or null, not an object"),
        ({"sample_index": "0"}, "'sample_index' must be an integer, not a string"),
        ({"sample_index": True}, "'sample_index' must be an integer, not a boolean"),
        ({"condition": "sideways"}, "'condition' must be 'original' or"),
        ({"messages": [{"role": "user"}]}, "missing field 'messages[0].content'"),
        ({"error": {"type": "X"}}, "missing field 'error.status'"),
    ],
)
def test_a_response_of_the_wrong_shape_names_the_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as info:
        validate_record(response_record(**change), where="results.jsonl:7")
    assert str(info.value).startswith("results.jsonl:7: ")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"premises": "P1 P2"}, "'premises' must be a list, not a string"),
        ({"proof": None}, "'proof' must be a list, not null"),
        ({"premises": [{"id": "P1", "text": 3}]}, "'premises[0].text' must be a string"),
        ({"answer": "yes"}, "'answer' must be true or false, not a string"),
    ],
)
def test_a_problem_of_the_wrong_shape_names_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        validate_record({**_problem(), **change}, where="results.jsonl:1")


def test_missing_fields_are_named_and_extra_ones_allowed() -> None:
    record = response_record(some_future_field={"x": 1})
    validate_record(record, where="x")
    del record["finished_at"]
    with pytest.raises(UsageError, match="missing field 'finished_at'"):
        validate_record(record, where="x")


def test_newer_schemas_unknown_kinds_and_non_objects_are_refused() -> None:
    with pytest.raises(UsageError, match="newer than this cotaudit reads"):
        validate_record(response_record(schema=SCHEMA_VERSION + 1), where="x")
    with pytest.raises(UsageError, match="unknown record kind 'verdict'"):
        validate_record({"kind": "verdict", "schema": 1}, where="x")
    with pytest.raises(UsageError, match="must be a JSON object"):
        validate_record([1, 2], where="x")


def test_a_problem_of_an_unknown_task_is_accepted() -> None:
    validate_record({"kind": "problem", "schema": 1, "task": "toy", "problem_id": "a"}, where="x")


def test_a_number_field_takes_integers_too() -> None:
    validate_record(response_record(latency_s=1), where="x")
    validate_record(response_record(latency_s=None), where="x")


def test_the_types_are_typeddicts_the_type_checker_sees() -> None:
    record: ProntoQAProblemRecord = _problem()  # type: ignore[assignment]
    assert record["task"] == "prontoqa"


def test_records_of_every_version_up_to_ours_are_read() -> None:
    for version in range(1, SCHEMA_VERSION + 1):
        validate_record(response_record(schema=version), where="x")
    docs = (Path(__file__).parents[2] / "docs" / "schema.md").read_text(encoding="utf-8")
    versions = docs.split("## Versions", 1)[1].split("\n## ", 1)[0]
    for version in range(1, SCHEMA_VERSION + 1):
        assert f"\n| {version} |" in versions


def test_the_in_line_field_tests_agree_with_the_fields_predicates() -> None:
    # The compiled check tests plain fields in line (isinstance, or exact number types);
    # for every field of every record type it must say what the field's predicate says.
    import enum
    import typing

    from cotaudit.schema.records import _compile, _field_test, _fields

    class Colour(enum.StrEnum):  # a str subclass a producer might hand the writer
        RED = "red"

    samples: list[Any] = [None, True, False, 0, 3, -1, 2.5, float("nan"), "", "x", Colour.RED]
    samples += [[], ["a"], [1], ("a",), {}, {"a": 1}, {"id": "p1", "text": "t"}, b"x", object()]
    types_seen = [*PROBLEM_RECORD_TYPES.values(), *RECORD_TYPES.values()]
    checked = 0
    while types_seen:
        typed = types_seen.pop()
        for name, hint in _fields(typed)[1].items():
            classes, exact_types, predicate = _field_test(hint)
            for value in samples:
                if classes is not None:
                    fast = isinstance(value, classes)
                elif exact_types is not None:
                    fast = type(value) in exact_types
                else:
                    fast = predicate(value)
                assert fast == _compile(hint)(value), (typed.__name__, name, value)
                checked += 1
            types_seen += [a for a in typing.get_args(hint) if typing.is_typeddict(a)]
    assert checked > 500
