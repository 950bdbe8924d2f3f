"""``cotaudit selection --json FILE`` beside the output directory (docs/selection.md, "Output"):
the directory gets its whole set all the same, so a ``selection.json`` of an earlier study never
stays beside a page of the new one; ``--json`` is one more copy of the JSON."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from tests.stream_records import response_record

EARLIER = "deployment,a,b,c,d\nx,30,20,20,30\n"
LATER = "deployment,a,b,c,d\nx,50,5,5,40\n"


def _a(document: bytes) -> int:
    a = orjson.loads(document)["deployments"]["x"]["a"]
    assert isinstance(a, int)
    return a


@pytest.mark.parametrize("json_flag", ["file", "-"])
def test_a_redirected_json_leaves_no_earlier_selection_json_beside_the_new_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_flag: str
) -> None:
    earlier, later = tmp_path / "earlier.csv", tmp_path / "later.csv"
    earlier.write_text(EARLIER, encoding="utf-8")
    later.write_text(LATER, encoding="utf-8")
    out = tmp_path / "out"
    base = ["selection", "--out", str(out), "--no-figures"]
    assert main([*base, "--counts", str(earlier)]) == 0
    assert _a((out / "selection.json").read_bytes()) == 30
    elsewhere = tmp_path / "elsewhere.json"
    capsys.readouterr()
    json_arg = str(elsewhere) if json_flag == "file" else "-"
    assert main([*base, "--counts", str(later), "--json", json_arg]) == 0
    said = capsys.readouterr()
    copy = elsewhere.read_bytes() if json_flag == "file" else said.out.encode("utf-8")
    # The selection.json in OUT used to stay the earlier study's (a = 30) beside a page and a
    # --json copy of the later one (a = 50).
    assert (out / "selection.json").read_bytes() == copy
    assert _a(copy) == 50
    page = (out / "selection.md").read_text(encoding="utf-8")
    assert "| x | 100 | 55.0% |" in page  # the later counts: accuracy (50 + 5) / 100
    assert sorted(p.name for p in out.iterdir()) == ["selection.json", "selection.md"]


def test_a_run_directorys_eval_selection_json_follows_a_redirected_json(tmp_path: Path) -> None:
    from runner.tasks.procedural import arith

    problems = [arith.generate(s, i, 0) for s in (1, 2) for i in range(3)]

    def stream(right: set[int]) -> bytes:
        records = [p.to_record() for p in problems]
        for i, p in enumerate(problems):
            for condition in ("original", "intervened"):
                value = p.variant(condition).answer if i in right else p.original.answer
                records.append(
                    response_record(
                        task="procedural",
                        endpoint="m",
                        problem_id=p.problem_id,
                        condition=condition,
                        text=f"Answer: {value}",
                    )
                )
        return b"".join(orjson.dumps(r) + b"\n" for r in records)

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes(stream({1, 3, 5}))
    assert main(["selection", str(run), "--no-figures"]) == 0
    first = orjson.loads((run / "eval" / "selection.json").read_bytes())
    assert first["deployments"]["m"]["a"] == 3
    (run / "results.jsonl").write_bytes(stream({0, 1, 2, 3, 4, 5}))  # the run redone
    copy = tmp_path / "copy.json"
    assert main(["selection", str(run), "--no-figures", "--json", str(copy)]) == 0
    assert orjson.loads(copy.read_bytes())["deployments"]["m"]["a"] == 6
    assert (run / "eval" / "selection.json").read_bytes() == copy.read_bytes()


def test_a_foreign_selection_json_in_out_is_refused_and_kept_though_json_goes_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "c.csv"
    csv.write_text(LATER, encoding="utf-8")
    out = tmp_path / "notes"
    out.mkdir()
    mine = out / "selection.json"
    mine.write_bytes(b'{"mine": true}\n')
    elsewhere = tmp_path / "elsewhere.json"
    args = ["selection", "--counts", str(csv), "--out", str(out), "--json", str(elsewhere)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--out: {mine} exists and is not a report written by cotaudit selection" in err
    assert mine.read_bytes() == b'{"mine": true}\n'
    assert [p.name for p in out.iterdir()] == ["selection.json"]
    assert not elsewhere.exists()


def test_json_naming_outs_own_selection_json_writes_it_once(tmp_path: Path) -> None:
    csv = tmp_path / "c.csv"
    csv.write_text(LATER, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    same = out / ".." / "out" / "selection.json"
    args = ["selection", "--counts", str(csv), "--out", str(out), "--json", str(same)]
    assert main([*args, "--no-figures"]) == 0
    assert _a((out / "selection.json").read_bytes()) == 50
    assert sorted(p.name for p in out.iterdir()) == ["selection.json", "selection.md"]
