"""The evaluator's speed work changes no output byte: every file of ``eval/`` (certificates,
report.json, report.md, the CSVs, ...) of fixed streams has the digest it had before.

The expected digests are in ``data/outputs_golden.json``, written by the code at the start of
branch ``evalspeed`` (commit 8249ef3, before any of its changes) with::

    .venv/bin/python -m tests.evaluator.test_outputs_unchanged --write

and written again when the stream's schema version went to 2 (the records and certificates
carry it: certificates.jsonl, stream.digests and report.json
changed; the CSVs and report.md did not), and when `evaluate`'s default cascade rule went
to `previous_aligned_step` (report.json records it in `options`; nothing else changed), and
when reasoning sections and `traces` began to count the responses whose reasoning the server
withheld (`reasoning_withheld`: the thinker case's report.json only), and when report.json's
`stream` began to count the audits whose records are incomplete (`incomplete_groups`: every
case's report.json, nothing else), and when `stream` began to record the run manifest's
`source` (`run_source`: the pack case's report.json) and report.md's Table 2 began to show
the pack's interval of an ablation row that is a main row's measurement again (A+A' and
A+A'+cascade: the pack case's report.md).
Regenerate them only for a change that is meant to change outputs, and say so in its commit.
``evaluation.json`` is left out: it records the output directory's files and the workers, not
what was evaluated.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from evaluator.evaldir import EVALUATION_NAME
from evaluator.parallel import BATCH_JOBS
from tests.evaluator.test_evaldir import _many
from tests.evaluator.test_pipeline import write_stream
from tests.evaluator.thinker_stream import write_thinker_run

GOLDEN = Path(__file__).parent / "data" / "outputs_golden.json"
PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"


def _many_run(run: Path) -> Path:
    run.mkdir(parents=True)
    write_stream(run / "results.jsonl", _many(2 * BATCH_JOBS + 3))
    return run


def _thinker_run(run: Path) -> Path:
    return write_thinker_run(run, "thinker:trace=faithful,answer=shortcut,p=1")


def _pack_run(run: Path) -> Path:
    args = ["import-evidence", str(PACK), "--model", "gpt-4o", "--out", str(run)]
    assert main(args) == 0
    return run


# name -> (how the run is made, the evaluate options)
CASES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "many": (_many_run, ("--n-boot", "200")),
    "many-dag-first-repeat": (
        _many_run,
        ("--n-boot", "50", "--cascade-mode", "dag_parent", "--first-repeat"),
    ),
    "thinker-both": (_thinker_run, ("--n-boot", "100", "--trace", "both")),
    "pack": (_pack_run, ("--n-boot", "200")),
}


def outputs(case: str, work: Path, workers: str = "0") -> dict[str, str]:
    """SHA-256 of every file of ``eval/`` (except evaluation.json) for one case, run in
    ``work``."""
    make, options = CASES[case]
    run = make(work / "run")
    out = work / "eval"
    argv = ["evaluate", str(run), "--out", str(out), "--no-figures", "--quiet", *options]
    assert main([*argv, "--workers", workers]) == 0
    # The report names the stream by its path (the temporary directory, written as WORK) and
    # an imported pack by its source directory (wherever ../shared is, written as PACK).
    return {
        path.name: hashlib.sha256(
            path.read_bytes().replace(bytes(work), b"WORK").replace(bytes(PACK.resolve()), b"PACK")
        ).hexdigest()
        for path in sorted(out.iterdir())
        if path.name != EVALUATION_NAME
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_those_of_the_code_before_the_speed_work(tmp_path: Path, case: str) -> None:
    if case == "pack" and not PACK.is_dir():
        pytest.skip(f"the GPT-4o evidence pack is not at {PACK}")
    expected = orjson.loads(GOLDEN.read_bytes())[case]
    assert outputs(case, tmp_path) == expected


def test_two_workers_give_the_golden_outputs_too(tmp_path: Path) -> None:
    expected = orjson.loads(GOLDEN.read_bytes())["thinker-both"]
    assert outputs("thinker-both", tmp_path, workers="2") == expected


def _write() -> None:
    golden: dict[str, dict[str, str]] = {}
    for case in sorted(CASES):
        with tempfile.TemporaryDirectory() as tmp:
            golden[case] = outputs(case, Path(tmp))
    GOLDEN.write_bytes(orjson.dumps(golden, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.evaluator.test_outputs_unchanged --write")
    _write()
