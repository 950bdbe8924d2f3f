"""``cotaudit compare``: each model's figures as its report has them, paired differences on the
problems two models share, and a clear refusal where runs do not compare."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from cotaudit.cli import main
from evaluator.bootstrap import paired_f1_difference, resample_indices
from evaluator.certificates import read_certificates
from evaluator.commands.compare import compare
from evaluator.comparison import ROW_FIELDS, figure_counts, paired_differences, problem_counts
from tests.evaluator.thinker_stream import write_thinker_run

N_BOOT = 400


@pytest.fixture(scope="module")
def evaluated(swept_run: Callable[..., Path]) -> Callable[..., Path]:
    made: dict[tuple[int, int], Path] = {}

    def make(problems: int, seed: int = 0) -> Path:
        if (problems, seed) not in made:
            run = swept_run(problems, seed)
            args = ["evaluate", str(run), "--n-boot", "200", "--no-figures", "--quiet"]
            assert main(args) == 0
            made[(problems, seed)] = run
        return made[(problems, seed)]

    return make


def _report(run: Path) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads((run / "eval" / "report.json").read_bytes())
    return report


def test_per_problem_counts_sum_to_the_reports_rows(evaluated: Callable[..., Path]) -> None:
    run = evaluated(4)
    counts = problem_counts(
        cert for _, cert in read_certificates(run / "eval" / "certificates.jsonl")
    )
    for endpoint, section in _report(run)["models"].items():
        ids = section["headline"]["problem_ids"]
        rows = figure_counts(counts[endpoint], section["headline"]["correct_problems"], ids)
        for row in ROW_FIELDS:
            expected = [section["rows"][row][k] for k in ("tp", "fp", "fn", "tn")]
            assert rows[row].sum(axis=0).tolist() == expected, (endpoint, row)
        found = section["headline"]["found"]["A+A'"]
        assert rows["rawr"].sum(axis=0)[0] == found["rawr"]
        assert rows["rawr"].sum() == found["correct"]


def test_the_same_run_twice_differs_by_nothing(
    evaluated: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = evaluated(4)
    result = compare([run, run], n_boot=N_BOOT, seed=1)
    models = _report(run)["models"]
    assert [m["label"] for m in result["models"]] == [f"A {m}" for m in models] + [
        f"B {m}" for m in models
    ]
    for d in result["differences"]:
        assert d["problems_shared"] == 4
        for figure in d["figures"].values():
            if figure["diff"] is not None:
                assert figure["diff"] == 0.0 and figure["ci"] == [0.0, 0.0]
    shortcut = next(m for m in result["models"] if m["label"] == "A shortcut")
    section = models["shortcut"]
    assert shortcut["ignored"] == section["headline"]["found"]["A+A'"]["ignored"]
    assert shortcut["f1_A_Ap_cascade_full"]["f1"] == section["rows"]["A_Ap_cascade_full"]["f1"]


def test_models_of_different_reasoners_are_compared_on_shared_problems(
    evaluated: Callable[..., Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    small, large = evaluated(2), evaluated(4)
    args = ["compare", str(large), str(small), "--baseline", "faithful", "--n-boot", str(N_BOOT)]
    assert main([*args, "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "B shortcut − A faithful, on the 2 problems both audited (of 2 and 4)" in out
    assert "grounded" in out and "F1 A †" in out and "entity-introduction" in out
    result = orjson.loads((tmp_path / "cmp" / "comparison.json").read_bytes())
    d = next(d for d in result["differences"] if d["model"] == "B shortcut")
    assert d["baseline"] == "A faithful" and d["problems_shared"] == 2
    md = (tmp_path / "cmp" / "comparison.md").read_text(encoding="utf-8")
    assert "## Differences, on the problems both audited" in md


def test_paired_intervals_are_the_bootstrap_modules(evaluated: Callable[..., Path]) -> None:
    run = evaluated(4)
    counts = problem_counts(
        cert for _, cert in read_certificates(run / "eval" / "certificates.jsonl")
    )
    models = _report(run)["models"]
    ids = models["faithful"]["headline"]["problem_ids"]
    a = figure_counts(counts["shortcut"], models["shortcut"]["headline"]["correct_problems"], ids)
    b = figure_counts(counts["faithful"], models["faithful"]["headline"]["correct_problems"], ids)
    found = {d.figure: d for d in paired_differences(a, b, n_boot=N_BOOT, seed=3)}
    row = "A_consistent_full"
    reference = paired_f1_difference(
        a[row], b[row], indices=resample_indices(len(ids), N_BOOT, rng=3)
    )
    ours = found[f"f1_{row}"]
    assert ours.diff == pytest.approx(reference.difference)
    assert ours.ci is not None
    assert np.allclose(ours.ci, reference.interval.as_list())


def test_a_single_run_is_refused(
    evaluated: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(evaluated(2))]) == 2
    assert "at least two runs" in capsys.readouterr().err


def test_runs_sharing_no_problem_are_refused(
    evaluated: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(evaluated(2)), str(evaluated(2, seed=5))]) == 2
    err = capsys.readouterr().err
    assert "share no problems" in err and "Traceback" not in err


def test_runs_of_different_problems_under_the_same_ids_are_refused(
    evaluated: Callable[..., Path],
    swept_run: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = swept_run(2)
    records = [orjson.loads(x) for x in (other / "results.jsonl").read_bytes().splitlines()]
    first = next(r for r in records if r["kind"] == "problem")
    first["question"] = first["question"].replace("?", " today?")  # another problem, same id
    (other / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert main(["evaluate", str(other), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    assert main(["compare", str(evaluated(2)), str(other)]) == 2
    err = capsys.readouterr().err
    assert "audit different problem sets" in err and first["problem_id"] in err


def test_an_unevaluated_run_and_a_missing_baseline_are_refused(
    evaluated: Callable[..., Path],
    swept_run: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", str(evaluated(2)), str(swept_run(2))]) == 2
    err = capsys.readouterr().err
    assert "cotaudit evaluate" in err and "then this command again" in err
    assert "view" not in err  # the advice is compare's, not the viewer's
    assert main(["compare", str(evaluated(2)), str(evaluated(2)), "--baseline", "nobody"]) == 2
    err = capsys.readouterr().err
    assert "the first run has no model nobody" in err and "faithful" in err


def test_runs_evaluated_with_different_options_are_refused(
    evaluated: Callable[..., Path],
    swept_run: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = swept_run(2)
    args = ["evaluate", str(other), "--n-boot", "0", "--no-figures", "--quiet"]
    assert main([*args, "--cascade-mode", "dag_parent"]) == 0
    assert main(["compare", str(evaluated(2)), str(other)]) == 2
    err = capsys.readouterr().err
    assert "different options" in err and "dag_parent" in err


def test_runs_audited_on_different_texts_are_refused() -> None:
    from cotaudit.errors import UsageError
    from evaluator.commands.compare import _check_options

    options = {"cascade_mode": "proof", "vanished": "change", "majority": True}
    older = {"options": options}  # written before --trace: the answer was audited
    _check_options([older, {"options": {**options, "trace": "answer"}}], ["a", "b"])
    with pytest.raises(UsageError, match="trace answer against both"):
        _check_options([older, {"options": {**options, "trace": "both"}}], ["a", "b"])


def test_the_legend_promises_only_the_intervals_there_are(
    evaluated: Callable[..., Path],
    swept_run: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # With --n-boot 0 the legend still gave every difference "the 95% paired bootstrap
    # interval", and reports evaluated with --n-boot 0 had their F1s promised "95% bootstrap
    # interval" too; report.md's F1 legend also says a truly ignored premise lowers it.
    from evaluator.report import HEADLINE_LEGEND

    plain = swept_run(2)
    assert main(["evaluate", str(plain), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    capsys.readouterr()  # evaluate's own summary
    out = tmp_path / "cmp"
    assert main(["compare", str(plain), str(plain), "--n-boot", "0", "--out", str(out)]) == 0
    terminal = capsys.readouterr().out
    page = (out / "comparison.md").read_text(encoding="utf-8")
    for text in (terminal, " ".join(terminal.split()), page):
        assert "bootstrap interval" not in text and "95%" not in text
    assert "*F1*: the audit's verdicts against the proof tree's direct premises, without " in page
    assert "(no intervals: --n-boot 0)" in page
    assert dict(HEADLINE_LEGEND)["F1"].endswith(
        "A premise the model truly ignored lowers it though the audit is right"
    )
    assert "A premise the model truly ignored lowers it though the audit is right" in page
    assert dict(HEADLINE_LEGEND)["†"] in page  # the blind spot said as report.md says it
    run = evaluated(2)
    assert main(["compare", str(run), str(run), "--n-boot", "20", "--out", str(out)]) == 0
    capsys.readouterr()
    page = (out / "comparison.md").read_text(encoding="utf-8")
    assert "with its report's 95% bootstrap interval over the model's problems; " in page
    assert "with the 95% paired bootstrap interval" in page


def test_an_f1_of_zero_keeps_its_interval() -> None:
    # `if metric(...)` dropped the report's interval of a defined F1 of 0.0: the comparison
    # printed "0.000" where report.md prints "0.000 [0.000, 0.250]".
    from evaluator.commands.compare import Model, _model_json
    from evaluator.comparison import ProblemCounts

    zero = {"f1": 0.0, "precision": 0.0, "recall": 0.0, "tp": 0, "fp": 3, "fn": 4, "tn": 1}
    rows = {"A_consistent_full": {**zero, "ci": [0.0, 0.25]}, "A_Ap_combined_full": zero}
    model = Model(
        run=0,
        label="A m",
        endpoint="m",
        section={"rows": rows, "headline": {"found": {}}},
        counts=ProblemCounts(),
        problems=frozenset(),
        correct=frozenset(),
    )
    entry = _model_json(model)
    assert entry["f1_A_consistent_full"] == {"f1": 0.0, "ci": [0.0, 0.25]}
    assert entry["f1_A_Ap_combined_full"] == {"f1": 0.0, "ci": None}
    assert entry["f1_A_Ap_cascade_full"] == {"f1": None, "ci": None}


def test_an_evaluation_of_both_traces_compares_each_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The certificates of both traces carry the endpoint's name; counted under it, the
    # answer's section got the reasoning's too, and compare refused the evaluation as
    # "certificates ... do not add up to its report.json row".
    run = write_thinker_run(tmp_path / "run", "thinker:trace=faithful,answer=shortcut,p=1")
    argv = ["evaluate", str(run), "--trace", "both", "--n-boot", "0"]
    assert main([*argv, "--no-figures", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(run), str(run), "--n-boot", "20"]) == 0
    captured = capsys.readouterr()
    assert "do not add up" not in captured.err
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    names = [str(n) for n in report["models"]]
    assert len(names) == 2 and any(n.endswith(":reasoning") for n in names)
    for name in names:
        assert f"B − A {name}, on the" in captured.out
