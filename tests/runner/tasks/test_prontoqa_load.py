from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cotaudit.domain.proposition import parse_canonical
from cotaudit.domain.sentences import parse_premise
from cotaudit.errors import UsageError
from runner.tasks.prontoqa_load import (
    load_logiclm,
    load_native,
    load_paper_problems,
)
from tests.runner.tasks.helpers import assert_valid_proof


def test_paper_problems(pack_dir: Path) -> None:
    problems = load_paper_problems(pack_dir / "data" / "prontoqa_50")
    assert [p.problem_id for p in problems] == [f"p{i:03d}" for i in range(1, 51)]
    for problem in problems:
        assert_valid_proof(problem)
        assert problem.premises[-1].text.split()[1] == "is"  # the entity premise comes last
    p001 = problems[0]
    assert p001.question == "Is Alex a belpus?" and p001.answer is False
    assert p001.proof[0].depends_on == ("P6", "P1")
    assert problems[14].distractors == ("P4", "P5")  # p015 has two off-chain premises
    single = load_paper_problems(pack_dir / "data" / "prontoqa_50" / "p001.json")
    assert single == [p001]


def test_logiclm_all_500(dev_json: Path) -> None:
    problems = load_logiclm(dev_json)
    raw = json.loads(dev_json.read_text())
    assert len(problems) == 500
    for problem, record in zip(problems, raw, strict=True):
        assert_valid_proof(problem)
        assert problem.hops == 5
        assert len(problem.premises) == len(record["context"].split(". "))
        # The gold label is about the source statement, which may be negated.
        statement = parse_premise(record["question"].split("? ")[1])
        assert statement is not None
        label = record["answer"] == "A"
        assert (parse_canonical(problem.proof[-1].conclusion) == statement) == label
        assert problem.extra["source_question"] == record["question"]
    first = problems[0]
    assert first.question == "Is Max sour?" and first.answer is False
    assert first.proof[0].depends_on == ("P18", "P4")
    assert first.proof[1].depends_on == ("S1", "P6")
    assert "P1" in first.distractors


def test_native_all_150(native_dir: Path) -> None:
    problems = [p for h in range(1, 6) for p in load_native(native_dir / f"{h}hop.json")]
    assert len(problems) == 150
    assert Counter(p.hops for p in problems) == {h: 30 for h in range(1, 6)}
    for problem in problems:
        assert_valid_proof(problem)
    first = problems[0]
    assert first.problem_id == "1hop-example1"
    assert first.extra["source_question"] == "True or false: Sally is not small."
    assert first.question == "Is Sally small?" and first.answer is False


def _write(tmp_path: Path, data: object, name: str = "dev.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


GOOD = {
    "id": "X1",
    "context": "Bempuses are bimpuses. Bimpuses are not sour. Alex is a bempus.",
    "question": "Is the following statement true or false? Alex is sour.",
    "answer": "B",
    "explanation": [
        "Alex is a bempus.",
        "Bempuses are bimpuses.",
        "Alex is a bimpus.",
        "Bimpuses are not sour.",
        "Alex is not sour.",
    ],
}


def test_logiclm_small_file(tmp_path: Path) -> None:
    (problem,) = load_logiclm(_write(tmp_path, [GOOD]))
    assert problem.question == "Is Alex sour?" and problem.answer is False
    assert [s.conclusion for s in problem.proof] == ["is(alex, bimpus)", "not_is(alex, sour)"]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"answer": "C"}, "record 0 (X1).answer"),
        ({"answer": "A"}, "record 0 (X1): explanation"),
        ({"context": None}, "record 0 (X1).context"),
        ({"explanation": ["Alex is a bempus.", "Alex is sour."]}, "explanation[1]"),
        ({"explanation": ["Alex is a bempus.", "Blah blah."]}, "explanation[1]"),
        ({"question": "Is the following statement true or false? Bempuses are sour."}, "question"),
        (
            {"context": "Bempuses are bimpuses. The sky is blue today. Alex is a bempus."},
            "premises",
        ),
    ],
)
def test_logiclm_errors_name_file_record_field(
    tmp_path: Path, change: dict[str, object], where: str
) -> None:
    path = _write(tmp_path, [GOOD | change])
    with pytest.raises(UsageError) as info:
        load_logiclm(path)
    assert str(path) in str(info.value)
    assert where in str(info.value)


def test_loader_file_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="file not found"):
        load_logiclm(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_native(bad)
    with pytest.raises(UsageError, match="no problem files"):
        load_paper_problems(tmp_path)
    broken = _write(tmp_path, {"problem_id": "p9", "premises": []}, name="p009.json")
    with pytest.raises(UsageError, match=r"p009\.json: missing field 'proof_tree'"):
        load_paper_problems(broken)


def test_native_errors_name_example(tmp_path: Path) -> None:
    path = _write(tmp_path, {"example7": {"test_example": {"query": "True or false: A is b."}}})
    with pytest.raises(UsageError, match=r"example7\.test_example.*answer"):
        load_native(path)


def test_a_field_of_the_wrong_type_is_named_in_json_terms(tmp_path: Path) -> None:
    record = {"problem_id": "p9", "premises": {"P1": "x"}, "proof_tree": []}
    broken = _write(tmp_path, record, name="p009.json")
    with pytest.raises(UsageError) as info:
        load_paper_problems(broken)
    assert "field 'premises' should be a list, got an object" in str(info.value)
