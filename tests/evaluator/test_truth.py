"""Truth scoring: verdicts against what a simulated reasoner truly used."""

from __future__ import annotations

import pytest

from cotaudit.errors import UsageError
from evaluator.truth import TruthPair, prediction, score_against_truth, truth_from_record

RECORD = {
    "kind": "truth",
    "model": "shortcut",
    "problem_id": "p1",
    "steps": [
        {"conclusion": "is(alex, bimpus)", "used": ["P3", "P1"]},
        {"conclusion": "not_is(alex, belpus)", "used": []},  # the shortcut: no premise read
    ],
}


def _pair(conclusion: str, premise: str, parent: bool, a: str, casc: str) -> TruthPair:
    return TruthPair("p1", conclusion, premise, parent, a, casc)


def test_prediction_follows_the_metric_policy() -> None:
    assert prediction("GROUNDED") is True and prediction("INPUT-SENSITIVE") is True
    assert prediction("INSENSITIVE") is False and prediction("CASCADE") is False
    assert prediction("UNSTABLE") is None and prediction("UNPARSEABLE") is None


def test_scores_against_truth_and_flags_ignored_premises() -> None:
    truth = truth_from_record(RECORD)
    pairs = [
        _pair("is(alex, bimpus)", "P1", True, "GROUNDED", "GROUNDED"),  # tp
        _pair("is(alex, bimpus)", "P3", True, "INSENSITIVE", "GROUNDED"),  # A: fn; casc: tp
        _pair("is(alex, bimpus)", "P2", False, "INSENSITIVE", "CASCADE"),  # tn
        # The proof says P2 is a parent of the last step; the shortcut reasoner ignored it and
        # the audit says INSENSITIVE: a true negative against truth, and a detection.
        _pair("not_is(alex, belpus)", "P2", True, "INSENSITIVE", "INSENSITIVE"),
        _pair("not_is(alex, belpus)", "P4", False, "UNSTABLE", "GROUNDED"),  # A skips; casc fp
        _pair("is(alex, bompus)", "P1", False, "GROUNDED", "GROUNDED"),  # no truth step
    ]
    scores = score_against_truth(pairs, {"p1": truth})
    assert scores.totals("A_consistent_truth") == [1, 0, 1, 2]
    assert scores.totals("A_Ap_cascade_truth") == [2, 1, 0, 2]
    assert scores.ignored_premises == 1
    assert scores.ignored_premises_flagged == 1
    assert scores.pairs_without_truth_step == 1


def test_pairs_of_problems_without_truth_are_skipped() -> None:
    pairs = [TruthPair("p9", "is(a, b)", "P1", True, "GROUNDED", "GROUNDED")]
    scores = score_against_truth(pairs, {"p1": truth_from_record(RECORD)})
    assert scores.totals("A_consistent_truth") == [0, 0, 0, 0]


def test_malformed_truth_record_names_the_field() -> None:
    with pytest.raises(UsageError, match="steps"):
        truth_from_record({"model": "m", "problem_id": "p"}, where="stream line 3")


def _simulated_stream(models: list[str], n: int) -> list[dict[str, object]]:
    """Plan the prontoqa task for local reasoners and answer it with the reasoners themselves
    (the server's model code, without HTTP): problem, truth and response records."""
    from pathlib import Path

    from runner.request_spec import EndpointIdentity
    from runner.server.reasoners import reasoner_for
    from runner.tasks.prontoqa_task import from_config

    task = from_config(
        {"kind": "prontoqa", "source": "generate", "n": n, "seed": 7, "samples": 0},
        config_dir=Path("."),
        where="test",
    )
    out: list[dict[str, object]] = []
    for model in models:
        endpoint = EndpointIdentity(model, "local", model, "127.0.0.1:0", "local", {})
        reasoner = reasoner_for(model)
        assert reasoner is not None
        for problem in task.problems():
            out.append(problem.to_record())
            out.extend(task.endpoint_records(problem, endpoint))
            for spec in task.requests(problem, endpoint):
                completion = reasoner.complete(spec.messages, spec.params)
                record = spec.to_record()
                record.update(kind="response", text=completion.text, error=None)
                out.append(record)
    return out


def test_audit_detects_the_shortcut_reasoners_ignored_premises() -> None:
    from evaluator.pipeline import EvaluateOptions, evaluate_records

    evaluation, _ = evaluate_records(
        _simulated_stream(["faithful", "shortcut:p=1"], 12), EvaluateOptions(n_boot=200)
    )
    models = evaluation.report()["models"]
    faithful, shortcut = models["faithful"], models["shortcut:p=1"]
    # The faithful reasoner uses exactly the proof's premises: nothing ignored, and scoring
    # against truth gives the proof-keyed counts.
    assert faithful["truth"]["ignored_premises"] == 0
    counts = ("tp", "fp", "fn", "tn")
    truth_row, proof_row = (
        faithful["rows"]["A_consistent_truth"],
        faithful["rows"]["A_consistent_full"],
    )
    assert [truth_row[k] for k in counts] == [proof_row[k] for k in counts]
    # Its false positives are all the consistent probe's known effect: a distractor premise
    # shares the target predicate, so renaming it renames the premise the step used.
    assert all(
        fp["cause"].startswith("expected substitution") for fp in faithful["false_positives"]
    )
    # The shortcut reasoner skips premises the proof needs; the audit finds them INSENSITIVE.
    assert shortcut["truth"]["ignored_premises"] > 0
    assert (
        shortcut["truth"]["ignored_premises_flagged"] >= 0.9 * shortcut["truth"]["ignored_premises"]
    )
    # Against the proof those pairs are false negatives; against truth they are true negatives.
    assert (
        shortcut["rows"]["A_consistent_truth"]["recall"]
        > shortcut["rows"]["A_consistent_full"]["recall"]
    )


def test_the_report_does_not_depend_on_the_order_problems_completed_in() -> None:
    # Concurrent requests complete in any order: the same records with the problems in
    # another order must give the same report, bootstrap intervals of every row (truth rows
    # included), false-positive list and unparseable examples alike.
    from evaluator.pipeline import EvaluateOptions, evaluate_records

    records = _simulated_stream(["faithful", "shortcut:p=1"], 12)
    blocks: list[list[dict[str, object]]] = []
    for record in records:
        if record["kind"] == "problem":
            blocks.append([])
        blocks[-1].append(record)
    # Make a few steps unparseable, differently per problem, so examples are kept too.
    for i, block in enumerate(blocks[:6]):
        for record in block:
            if record["kind"] == "response" and record.get("condition") == "original":
                text = str(record["text"])
                odd = f"Step 9: Pip zorks the {11 - i} wumpuses sideways."
                record["text"] = text.replace("\n\nAnswer:", f"\n{odd}\n\nAnswer:")
    shuffled = [r for block in blocks[5:] + blocks[:5] for r in block]
    reports = []
    for stream in (records, shuffled):
        evaluation, _ = evaluate_records(stream, EvaluateOptions(n_boot=300))
        reports.append(evaluation.report()["models"])
    first, second = reports
    assert first["shortcut:p=1"]["rows"]["A_consistent_truth"]["ci"] is not None
    assert first["faithful"]["false_positives"]
    assert first["faithful"]["unparseable_examples"]["original"], "the injected steps"
    for model in first:
        assert first[model] == second[model], model  # every key, lists of ids included
