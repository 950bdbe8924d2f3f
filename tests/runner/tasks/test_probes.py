from __future__ import annotations

import json
from pathlib import Path

import pytest

from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.domain.sentences import parse_premise
from runner.tasks.probes import build_probes, existing_names, fresh_word, substitute
from runner.tasks.prompts import render_prompt
from runner.tasks.prontoqa_load import load_paper_problems


def _problem(texts: list[str], question: str = "Is Alex a belpus?") -> Problem:
    premises = tuple(Premise(f"P{i}", t) for i, t in enumerate(texts, start=1))
    return Problem("t1", premises, question, False, (ProofStep(1, "is(alex, x)", ("P1",)),))


PAPER = _problem(
    [
        "Bempuses are bimpuses",
        "Bimpuses are bompuses",
        "Bompuses are not belpuses",
        "Alex is a bempus",
    ]
)


def _by(problem: Problem, **kw: str) -> dict[tuple[str, str], tuple[str, ...]]:
    return {
        (p.condition, p.target_premise): tuple(x.text for x in p.premises)
        for p in build_probes(problem, **kw)  # type: ignore[arg-type]
    }


def test_three_probes_per_premise_in_order() -> None:
    probes = build_probes(PAPER)
    assert [(p.condition, p.target_premise) for p in probes[:3]] == [
        ("consistent", "P1"),
        ("local", "P1"),
        ("surface", "P1"),
    ]
    assert len(probes) == 3 * len(PAPER.premises)


def test_consistent_and_local_substitution_with_inflection_and_capitals() -> None:
    probes = _by(PAPER)
    assert probes["consistent", "P1"] == (
        "Bempuses are zqbimpuses",
        "Zqbimpuses are bompuses",
        "Bompuses are not belpuses",
        "Alex is a bempus",
    )
    assert probes["local", "P1"] == (
        "Bempuses are zqbimpuses",
        "Bimpuses are bompuses",
        "Bompuses are not belpuses",
        "Alex is a bempus",
    )
    # The entity premise's object also appears as a plural subject elsewhere.
    assert probes["consistent", "P4"][0] == "Zqbempuses are bimpuses"
    assert probes["consistent", "P4"][3] == "Alex is a zqbempus"
    assert probes["local", "P4"][0] == "Bempuses are bimpuses"


def test_substitution_records_the_fresh_word_and_question_is_untouched() -> None:
    probe = build_probes(PAPER)[6]  # consistent P3: target belpus, also in the question
    assert probe.substitution == {"belpus": "zqbelpus"}
    assert probe.premises[2].text == "Bompuses are not zqbelpuses"
    record = probe.record()
    assert record["substitution"] == {"belpus": "zqbelpus"}
    assert record["premises"][2] == {"id": "P3", "text": "Bompuses are not zqbelpuses"}
    assert render_prompt(probe.premises, PAPER.question).count("Is Alex a belpus?") == 1


def test_surface_rephrase_rules() -> None:
    probes = {p.target_premise: p for p in build_probes(PAPER) if p.condition == "surface"}
    assert probes["P1"].rephrase == {
        "from": "Bempuses are bimpuses",
        "to": "Every bempus is a bimpus",
    }
    assert probes["P3"].premises[2].text == "No bompus is a belpus"
    assert probes["P4"].premises[3].text == "Alex is one of the bempuses"
    assert probes["P4"].substitution is None
    # Only the target premise changes.
    assert [p.text for p in probes["P1"].premises[1:]] == [p.text for p in PAPER.premises[1:]]


def test_adjectives_articles_and_negation() -> None:
    problem = _problem(
        [
            "Each yumpus is an impus",
            "Impuses are not sour",
            "Every numpus is sour",
            "Max is a yumpus",
        ],
        "Is Max sour?",
    )
    probes = _by(problem)
    assert probes["consistent", "P1"][0] == "Each yumpus is a zqimpus"
    assert probes["consistent", "P1"][1] == "Zqimpuses are not sour"
    assert probes["consistent", "P2"][1:3] == ("Impuses are not zqsour", "Every numpus is zqsour")
    assert probes["local", "P2"][2] == "Every numpus is sour"
    assert probes["surface", "P2"][1] == "No impus is sour"
    assert probes["surface", "P1"][0] == "Yumpuses are impuses"
    for texts in probes.values():
        assert all(parse_premise(t) is not None for t in texts)


def test_never_stacked_and_never_colliding() -> None:
    problem = _problem(["Bempuses are bimpuses", "Zqbimpuses are bompuses", "Alex is a bempus"])
    probes = _by(problem)
    # zqbimpus already exists, so the next candidate is used.
    assert probes["consistent", "P1"][:2] == ("Bempuses are zqxbimpuses", "Zqbimpuses are bompuses")
    # Built from the original every time: the zq-name premise gets exactly one more prefix.
    assert probes["consistent", "P2"][1] == "Zqbimpuses are zqbompuses"
    for texts in _by(PAPER).values():
        assert not any("zqzq" in t.lower() for t in texts)
    assert fresh_word("bimpus", existing_names(problem)) == "zqxbimpus"


def test_supplied_fresh_words() -> None:
    probes = _by(PAPER, fresh_words={"bimpus": "frondus"})  # type: ignore[arg-type]
    assert probes["consistent", "P1"][:2] == ("Bempuses are fronduses", "Fronduses are bompuses")
    with pytest.raises(ValueError, match="already occurs"):
        build_probes(PAPER, fresh_words={"bimpus": "bompus"})


def test_unreadable_premise_is_named() -> None:
    with pytest.raises(ValueError, match="premise P2"):
        build_probes(_problem(["Bempuses are bimpuses", "The sky is very blue today"]))


def test_substitute_leaves_other_words_alone() -> None:
    assert substitute("Bempuses are bimpuses", "bimpus", "zqbimpus") == "Bempuses are zqbimpuses"
    assert substitute("Zqbimpuses are bimpuses", "bimpus", "x") == "Zqbimpuses are xes"


_PACK_CONDITIONS = {"semantic": "consistent", "local_semantic": "local", "surface": "surface"}


def test_whole_pack_byte_for_byte(pack_dir: Path) -> None:
    problems = load_paper_problems(pack_dir / "data" / "prontoqa_50")
    checked = 0
    for problem in problems:
        stored = [
            json.loads(path.read_text())
            for path in sorted(
                (pack_dir / "evidence/gpt-4o" / problem.problem_id / "probes").glob("*.json")
            )
        ]
        # Supply the recorded fresh word wherever it is not the default zq form.
        fresh_words = {
            old: new
            for record in stored
            for old, new in (record["substitution"] or {}).items()
            if new != "zq" + old
        }
        built = {
            (p.condition, p.target_premise): p
            for p in build_probes(problem, fresh_words=fresh_words)
        }
        for record in stored:
            probe = built[_PACK_CONDITIONS[record["probe_type"]], record["target_premise"]]
            where = f"{problem.problem_id} {record['probe_type']} {record['target_premise']}"
            assert [{"id": p.id, "text": p.text} for p in probe.premises] == record[
                "modified_premises"
            ], where
            assert render_prompt(probe.premises, problem.question) == record["prompt"], where
            if probe.condition == "surface":
                assert probe.rephrase == {
                    "from": record["original_text"],
                    "to": record["rephrased_text"],
                }, where
            else:
                assert probe.substitution == record["substitution"], where
            checked += 1
    assert checked == 840
