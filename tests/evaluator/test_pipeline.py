"""The end-to-end pipeline on small hand-written streams whose verdicts are known."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.domain.problem import Premise, Problem, ProofStep
from evaluator.pipeline import EvaluateOptions, evaluate_records
from runner.request_spec import EndpointIdentity, make_spec

ENDPOINT = EndpointIdentity("ep", "local", "faithful", "127.0.0.1:1", "local", {})
PROBLEM = Problem(
    problem_id="q1",
    premises=(
        Premise("P1", "Bempuses are bimpuses"),
        Premise("P2", "Bimpuses are bompuses"),
        Premise("P3", "Alex is a bempus"),
    ),
    question="Is Alex a bompus?",
    answer=True,
    proof=(
        ProofStep(1, "is(alex, bimpus)", ("P3", "P1")),
        ProofStep(2, "is(alex, bompus)", ("S1", "P2")),
    ),
)
S1 = "Since bempuses are bimpuses and Alex is a bempus, Alex is a bimpus."
S2 = "Since bimpuses are bompuses and Alex is a bimpus, Alex is a bompus."


def cot(*steps: str, answer: str = "True") -> str:
    body = "\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, start=1))
    return f"{body}\n\nAnswer: {answer}"


ORIGINAL = cot(S1, S2)
# What a faithful reasoner writes under each probe (consistent, local, surface) per premise.
PROBES: dict[tuple[str, str], str] = {
    ("consistent", "P1"): cot(
        "Since bempuses are zqbimpuses and Alex is a bempus, Alex is a zqbimpus.",
        "Since zqbimpuses are bompuses and Alex is a zqbimpus, Alex is a bompus.",
    ),
    ("consistent", "P2"): cot(
        S1, "Since bimpuses are zqbompuses and Alex is a bimpus, Alex is a zqbompus."
    ),
    ("consistent", "P3"): cot(
        "Since zqbempuses are bimpuses and Alex is a zqbempus, Alex is a bimpus.", S2
    ),
    ("local", "P1"): cot(
        "Since bempuses are zqbimpuses and Alex is a bempus, Alex is a zqbimpus.",
        "We cannot determine whether Alex is a bompus.",
        answer="False",
    ),
    ("local", "P2"): cot(
        S1, "Since bimpuses are zqbompuses and Alex is a bimpus, Alex is a zqbompus."
    ),
    ("local", "P3"): cot("We cannot determine whether Alex is a bimpus.", answer="False"),
}


def response(
    condition: str,
    text: str | None,
    *,
    premise: str | None = None,
    sample_index: int = 0,
    error: dict[str, Any] | None = None,
    substitution: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec = make_spec(
        ENDPOINT,
        task="prontoqa",
        problem_id=PROBLEM.problem_id,
        condition=condition,
        messages=[{"role": "user", "content": f"{condition} {premise}"}],
        temperature=0.7 if condition == "sample" else 0.0,
        target_premise=premise,
        sample_index=sample_index,
        probe=None if substitution is None else {"substitution": substitution},
    )
    record = spec.to_record()
    record.update(
        kind="response",
        text=None if error else text,
        finish_reason=None if error else "stop",
        usage=None if error else {"input_tokens": 100, "output_tokens": 50},
        latency_s=0.1,
        attempts=1,
        attempt_outcomes=["500" if error else "ok"],
        cached=False,
        started_at="2026-12-01T10:00:00.000Z",
        finished_at="2026-12-01T10:00:00.100Z",
        error=error,
    )
    return record


TARGETS = {"P1": "bimpus", "P2": "bompus", "P3": "bempus"}


def records(
    *, samples: Sequence[str] = (), repeats: dict[tuple[str, str], list[str]] | None = None
) -> list[dict[str, Any]]:
    """A complete stream for PROBLEM from the faithful texts above."""
    out: list[dict[str, Any]] = [PROBLEM.to_record(), response("original", ORIGINAL)]
    for premise in ("P1", "P2", "P3"):
        subst = {TARGETS[premise]: "zq" + TARGETS[premise]}
        for condition in ("consistent", "local", "surface"):
            texts = (repeats or {}).get((condition, premise)) or [
                PROBES.get((condition, premise), ORIGINAL)
            ]
            for i, text in enumerate(texts):
                out.append(
                    response(
                        condition,
                        text,
                        premise=premise,
                        sample_index=i,
                        substitution=None if condition == "surface" else subst,
                    )
                )
    for i, text in enumerate(samples):
        out.append(response("sample", text, sample_index=i))
    return out


def write_stream(path: Path, recs: Sequence[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def _by_key(audits: Any) -> dict[tuple[int, str], dict[str, Any]]:
    return {(c["cot_step"], c["premise_id"]): c for a in audits for c in a.certificates}


def test_faithful_stream_gives_the_expected_verdicts() -> None:
    evaluation, audits = evaluate_records(records(), EvaluateOptions(n_boot=0))
    certs = _by_key(audits)
    assert len(certs) == 6
    assert certs[(1, "P1")]["verdict_consistent"] == "GROUNDED"
    assert certs[(1, "P1")]["phi"]["consistent"] == "is(alex, zqbimpus)"
    assert certs[(1, "P1")]["alignment"]["consistent"] == "substituted"
    assert certs[(2, "P2")]["verdict_consistent"] == "GROUNDED"
    assert certs[(2, "P1")]["verdict_consistent"] == "INSENSITIVE"
    # The entity premise: invisible to consistent substitution (the paper's blind spot) ...
    assert certs[(1, "P3")]["verdict_consistent"] == "INSENSITIVE"
    # ... and seen by the local probe: its output (read whole) no longer reaches step 1 while
    # the surface control does, so the conclusion vanished: a change under its own rule.
    assert certs[(1, "P3")]["alignment"]["local"] == "vanished"
    assert certs[(1, "P3")]["delta"]["local"] is True
    assert certs[(1, "P3")]["decision_rule"] == "R_GROUNDED_VANISHED"
    assert certs[(1, "P3")]["verdict_cascade"] == "GROUNDED"
    # Under local P3 step 2 vanishes too, downstream of step 1: the cascade filter takes it.
    assert certs[(2, "P3")]["decision_rule"] == "R_GROUNDED_VANISHED"
    assert certs[(2, "P3")]["verdict_cascade"] == "CASCADE"
    # Under local P1 the chain breaks at step 2: vanished below a changed step 1, a cascade.
    assert certs[(2, "P1")]["alignment"]["local"] == "vanished"
    assert certs[(2, "P1")]["verdict_cascade"] == "CASCADE"
    report = evaluation.report()["models"]["ep"]
    row = report["rows"]["A_consistent_full"]
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (2, 0, 1, 3)
    assert report["rows"]["A_consistent_pred"]["fn"] == 0
    assert report["parse_rates"]["original"] == 1.0
    assert report["non_assertions"]["local"] == {"comment": 2}
    assert report["alignment"]["matched"] == 2
    assert report["alignment"]["probe_steps_missing"]["local"] == 3
    assert report["certificates"] == {"total": 6, "evaluable": 6}
    assert report["problems_audited"] == 1
    assert report["rawr"]["rawr"] == 1  # right answer, entity premise insensitive under A
    assert report["rawr_combined"]["rawr"] == 0  # ... which A+A' sees through the local probe
    assert report["vanished"] == {
        "pairs": 3,
        "grounded_by_vanished": 3,
        "cascaded": 2,
        "grounded_after_cascade": 1,
    }
    assert report["rows"]["A_Ap_cascade_full"]["fp"] == 0
    assert report["rows"]["A_Ap_cascade_full"]["fn"] == 0
    assert "self_consistency_full" not in report["rows"]  # no samples in this stream


def test_certificate_sources_hash_the_raw_outputs() -> None:
    _, audits = evaluate_records(records(), EvaluateOptions(n_boot=0))
    cert = _by_key(audits)[(1, "P1")]
    assert set(cert["sources"]) == {
        "ep/q1/original/-/0",
        "ep/q1/consistent/P1/0",
        "ep/q1/local/P1/0",
        "ep/q1/surface/P1/0",
    }
    import hashlib

    assert cert["sources"]["ep/q1/original/-/0"] == hashlib.sha256(ORIGINAL.encode()).hexdigest()


def test_restated_premise_step_is_unmatched_and_probe_alignment_ignores_shift() -> None:
    shifted = cot("Bempuses are bimpuses.", S1, S2)
    recs = records()
    recs[1] = response("original", shifted)
    _, audits = evaluate_records(recs, EvaluateOptions(n_boot=0))
    certs = _by_key(audits)
    assert certs[(1, "P1")]["excluded"] == ["unmatched_cot_step"]
    # The probe outputs do not restate: content alignment pairs original step 2 with probe
    # step 1, so no spurious change appears.
    assert certs[(2, "P2")]["probe_steps"]["consistent"] == 1
    assert certs[(2, "P2")]["verdict_consistent"] == "INSENSITIVE"
    assert certs[(3, "P2")]["verdict_consistent"] == "GROUNDED"


def test_error_records_are_counted_and_superseded_by_a_retry() -> None:
    recs = records()
    failed = response("surface", None, premise="P2", error={"type": "rate_limit"})
    recs.insert(2, failed)  # an early failure of a request that later succeeded
    evaluation, audits = evaluate_records(recs, EvaluateOptions(n_boot=0))
    report = evaluation.report()["models"]["ep"]
    assert report["superseded_records"] == 1
    assert report["errors"]["count"] == 0  # the last record of the request wins
    recs = records()
    recs[-1] = dict(recs[-1], text=None, error={"type": "server_error"})
    evaluation, audits = evaluate_records(recs, EvaluateOptions(n_boot=0))
    report = evaluation.report()["models"]["ep"]
    assert report["errors"] == {"count": 1, "by_type": {"server_error": 1}}
    assert _by_key(audits)[(1, "P3")]["verdict"] == "UNPARSEABLE"  # surface P3 never came


def test_raw_samples_feed_self_consistency() -> None:
    flaky = cot(S1, "Since bimpuses are bompuses, Alex is not a bompus.")
    samples = [ORIGINAL, ORIGINAL, ORIGINAL, ORIGINAL, flaky]
    evaluation, _ = evaluate_records(records(samples=samples), EvaluateOptions(n_boot=0))
    row = evaluation.report()["models"]["ep"]["rows"]["self_consistency_full"]
    # Step 1 agrees 5/5 and step 2 4/5 = 0.8: both consistent, every premise predicted
    # (gold parents: P3, P1 at step 1; P2 at step 2).
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (3, 3, 0, 0)
    samples = [ORIGINAL, ORIGINAL, ORIGINAL, flaky, flaky]
    evaluation, _ = evaluate_records(records(samples=samples), EvaluateOptions(n_boot=0))
    row = evaluation.report()["models"]["ep"]["rows"]["self_consistency_full"]
    # Step 2 now agrees 3/5 < 0.8: inconsistent, predicts no premise.
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (2, 1, 1, 2)


def test_probe_repeats_take_the_majority_conclusion() -> None:
    noisy = cot(S1, "Since bimpuses are bompuses and Alex is a bimpus, Alex is not a bompus.")
    repeats = {("consistent", "P1"): [noisy, PROBES[("consistent", "P1")], noisy]}
    _, audits = evaluate_records(records(repeats=repeats), EvaluateOptions(n_boot=0))
    cert = _by_key(audits)[(2, "P1")]
    # 2 of 3 repeats say bempus: the majority is a (spurious) change, decided by vote.
    assert cert["phi"]["consistent"] == "not_is(alex, bompus)"
    repeats = {("consistent", "P1"): [noisy, PROBES[("consistent", "P1")], ORIGINAL]}
    _, audits = evaluate_records(records(repeats=repeats), EvaluateOptions(n_boot=0))
    assert _by_key(audits)[(2, "P1")]["phi"]["consistent"] == "is(alex, bompus)"


def test_groups_are_released_before_the_stream_ends() -> None:
    from evaluator.pipeline import Evaluation

    evaluation = Evaluation(EvaluateOptions(n_boot=0, samples=0))
    released_at = []
    for i, record in enumerate(records()):
        if list(evaluation.feed(record)):
            released_at.append(i)
    assert released_at == [len(records()) - 1]  # complete at its last probe, not at the end
    assert list(evaluation.finish()) == []


def test_truth_records_add_truth_rows_and_flag_ignored_premises() -> None:
    truth = {
        "kind": "truth",
        "schema": 1,
        "model": "faithful",
        "problem_id": "q1",
        # The reasoner truly skipped P3 at step 1 (a shortcut): the proof says it is a parent.
        "steps": [
            {"conclusion": "is(alex, bimpus)", "used": ["P1"]},
            {"conclusion": "is(alex, bompus)", "used": ["P2"]},
        ],
    }
    recs = records()
    recs.insert(1, truth)
    evaluation, _ = evaluate_records(recs, EvaluateOptions(n_boot=50, seed=1))
    report = evaluation.report()["models"]["ep"]
    row = report["rows"]["A_consistent_truth"]
    assert (row["tp"], row["fp"], row["fn"], row["tn"]) == (2, 0, 0, 4)
    assert report["truth"]["ignored_premises"] == 1
    assert report["truth"]["ignored_premises_flagged"] == 1
    assert row["ci"] is not None


def test_problem_record_required_before_responses() -> None:
    from cotaudit.errors import UsageError

    # A response before its problem record is reported, never dropped silently.
    with pytest.raises(UsageError, match=r"record 1: response ep/q1/original/-/0 .* before"):
        evaluate_records(records()[1:], EvaluateOptions(n_boot=0))


def test_majority_vote_removes_a_false_positive_from_output_variation() -> None:
    noisy = cot(
        "Since bempuses are zqbimpuses and Alex is a bempus, Alex is a zqbimpus.",
        "Since zqbimpuses are bompuses and Alex is a zqbimpus, Alex is not a bompus.",
    )
    faithful = PROBES[("consistent", "P1")]
    repeats = {("consistent", "P1"): [noisy, faithful, faithful]}
    fp = {}
    for majority in (False, True):
        evaluation, _ = evaluate_records(
            records(repeats=repeats), EvaluateOptions(n_boot=0, majority=majority)
        )
        report = evaluation.report()["models"]["ep"]
        fp[majority] = report["rows"]["A_consistent_full"]["fp"]
        assert report["alignment"]["probe_vote"] == ("majority" if majority else "first repeat")
    assert fp == {False: 1, True: 0}


def test_absent_probe_output_is_reported_and_never_a_change() -> None:
    recs = [
        r
        for r in records()
        if not (r.get("condition") == "local" and r.get("target_premise") == "P2")
    ]
    evaluation, audits = evaluate_records(recs, EvaluateOptions(n_boot=0))
    report = evaluation.report()["models"]["ep"]
    assert report["alignment"]["probe_outputs_absent"] == {
        "consistent": 0,
        "local": 1,
        "surface": 0,
    }
    cert = _by_key(audits)[(2, "P2")]
    assert cert["alignment"]["local"] == "missing" and cert["delta"]["local"] is None
    assert cert["verdict"] == "GROUNDED" and cert["decision_rule"] == "R_GROUNDED_PRED_CHANGE"


def test_a_restarted_probe_chain_is_looked_up_by_the_aligned_step_not_its_number() -> None:
    # "Wait, let me reconsider": the probe writes Step 1 twice. Content alignment pairs proof
    # step S1 with the second "Step 1"; the certificate must show that step, not the first.
    restarted = (
        "Step 1: Since bempuses are bimpuses and Alex is a bempus, Alex is a bempus.\n"
        "Step 2: Wait, let me reconsider.\n"
        f"Step 1: {S1}\n"
        "Step 2: Since bimpuses are zqbompuses and Alex is a bimpus, Alex is a zqbompus.\n\n"
        "Answer: False"
    )
    repeats = {("consistent", "P2"): [restarted]}
    _, audits = evaluate_records(records(repeats=repeats), EvaluateOptions(n_boot=0))
    cert = _by_key(audits)[(1, "P2")]
    assert cert["alignment"]["consistent"] == "exact"
    assert cert["phi"]["consistent"] == "is(alex, bimpus)"
    assert cert["delta"]["consistent"] is False
    assert cert["verdict_consistent"] == "INSENSITIVE"
    assert cert["probe_steps"]["consistent"] == 1
    assert cert["probe_step_index"]["consistent"] == 3  # the 3rd step written (1-based)


def test_a_restarted_original_chain_keeps_one_certificate_per_written_step() -> None:
    restarted = cot(S1, "Wait, let me reconsider.").replace("\n\nAnswer: True", "")
    restarted += f"\nStep 1: {S1}\nStep 2: {S2}\n\nAnswer: True"
    recs = records()
    recs[1] = response("original", restarted)
    _, audits = evaluate_records(recs, EvaluateOptions(n_boot=0))
    ids = [c["id"] for a in audits for c in a.certificates]
    assert len(ids) == len(set(ids)) == 4 * 3
    assert "ep/q1/S1.2/P1" in ids and "ep/q1/S2.2/P3" in ids
    texts = {c["id"]: c["step_text"] for a in audits for c in a.certificates}
    assert texts["ep/q1/S2/P1"] == "Wait, let me reconsider."
    assert texts["ep/q1/S2.2/P1"] == S2


def test_todays_reading_of_a_vanished_conclusion_is_kept_as_an_option() -> None:
    _, audits = evaluate_records(records(), EvaluateOptions(n_boot=0, vanished="missing"))
    certs = _by_key(audits)
    assert certs[(1, "P3")]["alignment"]["local"] == "missing"
    assert certs[(1, "P3")]["delta"]["local"] is None
    assert certs[(1, "P3")]["verdict"] == "INSENSITIVE"  # decided from A alone


def test_a_conclusion_does_not_vanish_when_the_output_was_not_read_whole() -> None:
    # The local output has a step the parser cannot read: the counterpart may hide there,
    # so the step stays missing (unparseable), never a change.
    unread = cot("Alex's category is a zqbempus thing of some sort maybe", answer="False")
    repeats = {("local", "P3"): [unread]}
    _, audits = evaluate_records(records(repeats=repeats), EvaluateOptions(n_boot=0))
    cert = _by_key(audits)[(1, "P3")]
    assert cert["step_status"] == "assertion"
    assert cert["alignment"]["local"] == "missing" and cert["delta"]["local"] is None


def test_a_shared_target_is_attributed_by_the_local_probe() -> None:
    from evaluator.audit import shared_targets

    shared = replace(
        PROBLEM,
        premises=(*PROBLEM.premises, Premise("P4", "Wumpuses are bimpuses")),
    )
    assert shared_targets(shared) == frozenset({"P1", "P4"})
    assert shared_targets(PROBLEM) == frozenset()
