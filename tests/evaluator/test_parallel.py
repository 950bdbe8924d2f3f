"""Problems audited in worker processes give the same evaluation, byte for byte, as problems
audited in the reading process: certificates, report and every other file of ``eval/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from evaluator.evaldir import EVALUATION_NAME
from evaluator.parallel import BATCH_JOBS
from tests.evaluator.test_evaldir import _hashes, _many
from tests.evaluator.test_pipeline import write_stream
from tests.evaluator.thinker_stream import write_thinker_run


def _evaluate(run: Path, out: Path, *args: str) -> dict[str, str]:
    assert main(["evaluate", str(run), "--out", str(out), "--quiet", *args]) == 0
    hashes = _hashes(out)
    del hashes[EVALUATION_NAME]  # it records the output directory's files, not the workers
    return hashes


def test_two_workers_write_what_one_process_writes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    # Enough problems for several batches, so that results come back out of order of
    # completion and are put back in order of submission.
    write_stream(run / "results.jsonl", _many(3 * BATCH_JOBS + 5))
    args = ("--n-boot", "300", "--no-figures")
    inline = _evaluate(run, tmp_path / "inline", *args, "--workers", "0")
    pooled = _evaluate(run, tmp_path / "pooled", *args, "--workers", "2")
    assert inline == pooled
    assert (tmp_path / "inline" / "certificates.jsonl").stat().st_size > 0


@pytest.mark.parametrize("workers", ["0", "2"])
def test_verify_holds_whatever_the_workers_of_evaluate_and_verify(
    tmp_path: Path, workers: str
) -> None:
    run = write_thinker_run(tmp_path / "run", "thinker:trace=faithful,answer=shortcut,p=1")
    evaluate = ["evaluate", str(run), "--n-boot", "100", "--no-figures", "--quiet"]
    assert main([*evaluate, "--trace", "both", "--workers", workers]) == 0
    other = "2" if workers == "0" else "0"
    assert main(["verify", str(run), "--workers", other]) == 0
