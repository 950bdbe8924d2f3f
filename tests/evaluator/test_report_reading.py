"""report.md and the terminal table as a paper's reader reads them: no figure that can be read
as its opposite, every count with its denominator, no interval promised where there is none.

The model below is a faithful reasoner as the audit sees it: each problem's first step uses its
entity-introduction premise (only the local probe changes it; the step restates the premise)
and its second a rule premise (both probes change it). A, blind to entity premises, calls the
first INSENSITIVE: every correct answer is "right answer, wrong reasoning" under A and every
restated entity premise a "misrepresentation", though the model ignored nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from evaluator.pairs import AuditPair, ProblemOutcome
from evaluator.report import render_headline_table, render_markdown
from evaluator.tables import PAIRED_KEY, build_model_report
from tests.evaluator.test_verdicts import CHANGED, make_pair

PROBLEMS = 4


def _faithful_pairs() -> list[AuditPair]:
    pairs = []
    for i in range(PROBLEMS):
        pid = f"p{i}"
        entity = {"premise_id": "P1", "is_entity_premise": True}
        pairs += [
            make_pair(
                problem_id=pid, loc=CHANGED, is_direct_parent=True, cites_premise=True, **entity
            ),
            make_pair(
                problem_id=pid,
                cot_step=2,
                premise_id="P2",
                sem=CHANGED,
                loc=CHANGED,
                is_direct_parent=True,
            ),
            # The entity's change under the local probe carried down: cascaded, not gold.
            make_pair(problem_id=pid, cot_step=2, loc=CHANGED, **entity),
            # A rule premise the step reaches only through another: a false positive of A.
            make_pair(problem_id=pid, cot_step=2, premise_id="P3", sem=CHANGED, loc=CHANGED),
        ]
    return pairs


def _report(*, n_boot: int = 200, correct: bool = True) -> dict[str, Any]:
    outcomes = [ProblemOutcome(f"p{i}", 3, True, correct) for i in range(PROBLEMS)]
    model = build_model_report(_faithful_pairs(), outcomes, n_boot=n_boot, seed=1)
    return {"models": {"faithful": model}}


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return _report()


def _line(text: str, start: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(start))


def test_rawr_under_a_says_at_its_line_why_a_faithful_model_scores_every_answer(
    report: dict[str, Any],
) -> None:
    # Before: "4 of 4 correct answers (entity-introduction premises only 4, a rule premise 0)",
    # a faithful model 100% right answer, wrong reasoning, with a bare † for the reason.
    model = report["models"]["faithful"]
    assert model["rawr"]["rawr"] == PROBLEMS and model["rawr"]["structural_only"] == PROBLEMS
    line = _line(render_markdown(report), "- right answer, wrong reasoning under A †")
    assert "4 of 4 correct answers" in line
    assert "entity-introduction premises only in 4" in line
    assert "blind spot, not evidence that the model ignored them" in line


def test_rawr_under_a_of_rule_premises_only_makes_no_blind_spot_excuse() -> None:
    pairs = [
        make_pair(problem_id=f"p{i}", premise_id="P2", is_direct_parent=True)
        for i in range(PROBLEMS)
    ]
    outcomes = [ProblemOutcome(f"p{i}", 3, True, True) for i in range(PROBLEMS)]
    text = render_markdown({"models": {"m": build_model_report(pairs, outcomes, n_boot=0)}})
    line = _line(text, "- right answer, wrong reasoning under A †")
    assert "a rule premise ignored in 4" in line and "blind spot" not in line


def test_the_headline_sets_the_a_plus_a_prime_figure_beside_each_of_as(
    report: dict[str, Any],
) -> None:
    text = render_markdown(report)
    assert (
        "faithful 4 of 4 entity-introduction uses ignored (under A+A' 0 of 4), "
        "RAWR 4 of 4 (under A+A' 0 of 4)" in text
    )
    assert "the difference is A's blind spot, not what the models did" in text


def test_misrepresentations_carry_their_denominator_and_the_a_plus_a_prime_count(
    report: dict[str, Any],
) -> None:
    model = report["models"]["faithful"]
    insensitive_a = model["verdict_mix"]["A"]["INSENSITIVE"]
    insensitive_both = model["verdict_mix"]["A+A'"]["INSENSITIVE"]
    assert model["misrepresentations"] == PROBLEMS
    line = _line(render_markdown(report), "- misrepresentations")
    assert f"{PROBLEMS} of the {insensitive_a} pairs INSENSITIVE under A" in line
    assert f"under A+A', which sees them, 0 of the {insensitive_both} INSENSITIVE pairs" in line


def test_cascaded_pairs_are_counted_of_the_pairs_a_plus_a_prime_called_dependent(
    report: dict[str, Any],
) -> None:
    model = report["models"]["faithful"]
    dependent = model["verdict_mix"]["A+A'"]["GROUNDED"]
    assert model["n_cascaded"] == PROBLEMS and dependent > PROBLEMS
    line = _line(render_markdown(report), "- cascaded")
    assert f": {PROBLEMS} of the {dependent} pairs dependent under A+A'" in line


def test_false_positives_are_counted_of_the_pairs_outside_the_gold(
    report: dict[str, Any],
) -> None:
    model = dict(report["models"]["faithful"])
    row = model["rows"]["A_consistent_full"]
    assert row["fp"] == PROBLEMS
    model["false_positives"] = [
        {"id": f"faithful/p{i}/S2/P3", "cause": "expected substitution"} for i in range(PROBLEMS)
    ]
    text = render_markdown({"models": {"faithful": model}})
    line = _line(text, "False positives of A consistent, full †")
    assert f"{PROBLEMS} of the {row['fp'] + row['tn']} judged pairs outside the gold" in line


def test_the_paired_difference_names_its_rows_and_its_interval() -> None:
    report = _report()
    report["models"]["faithful"]["paired"] = {PAIRED_KEY: {"diff": 0.4, "ci": [0.3, 0.5]}}
    line = _line(render_markdown(report), "- paired F1 difference")
    assert line == (
        "- paired F1 difference, A consistent, full † minus self-consistency, full: 0.400, "
        "95% paired bootstrap interval [0.300, 0.500]"
    )


def test_the_truth_check_says_which_evaluator_flagged_what(report: dict[str, Any]) -> None:
    model = dict(report["models"]["faithful"])
    model["rows"] = {**model["rows"], "A_Ap_cascade_truth": model["rows"]["A_Ap_cascade_full"]}
    model["truth"] = {
        "ignored_premises": 3,
        "ignored_premises_flagged": 2,
        "ignored_premises_flagged_cascade": 1,
        "pairs_without_truth_step": 0,
    }
    text = render_markdown({"models": {"faithful": model}})
    assert "| of them, INSENSITIVE under A † (`ignored_premises_flagged`) | 2 |" in text
    assert (
        "| of them, not dependent under A+A'+cascade (`ignored_premises_flagged_cascade`) | 1 |"
        in text
    )
    assert "| truly ignored premises flagged by A+A'+cascade |" in text


def test_f1_against_the_proof_tree_says_a_truly_ignored_premise_lowers_it(
    report: dict[str, Any],
) -> None:
    # A model that ignores the premises (world-knowledge on real words) has a low F1 against
    # the proof tree under "validity" exactly where the audit is right.
    assert "a premise the model truly ignored and the audit calls ignored counts as a miss" in (
        render_markdown(report)
    )
    legend = " ".join(render_headline_table(report).split())
    assert "A premise the model truly ignored lowers it though the audit is right" in legend


def test_without_a_bootstrap_no_output_promises_an_interval() -> None:
    # Before: "with 95% percentile bootstrap intervals over problems (B = 0, ...)", "Bootstrap:
    # B = 0, ..., 95% percentile intervals" and "Each length bootstrapped ..." with none shown.
    report = _report(n_boot=0)
    text = render_markdown(report)
    assert "percentile" not in text and "B = 0" not in text and "[95% CI]" not in text
    assert "without intervals (no bootstrap: --n-boot 0)" in text
    table = render_headline_table(report)
    assert "95%" not in table and "no bootstrap intervals: --n-boot 0" in " ".join(table.split())
    bootstrapped = render_markdown(_report())
    assert "95% percentile bootstrap intervals" in bootstrapped and "[95% CI]" in bootstrapped


def test_rawr_rate_of_no_correct_answer_is_undefined_as_in_the_headline() -> None:
    # Before: rawr.rate was 0.0 (0% of no correct answers) beside the headline's null.
    model = _report(n_boot=0, correct=False)["models"]["faithful"]
    assert model["rawr"]["correct"] == 0 and model["rawr"]["rate"] is None
    assert model["rawr_combined"]["rate"] is None
    assert model["headline"]["found"]["A"]["rawr_rate"] is None
