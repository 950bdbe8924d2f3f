"""``cotaudit selection``: CSV validation (exit 2 naming line and column), outputs, run dirs."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from evaluator.commands.selection import parse_counts_csv
from evaluator.selection import JointCounts
from evaluator.selection_report import FIGURES
from tests.stream_records import response_record


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty counts file"),
        ("deployment,a,b,c\nx,1,2,3\n", "line 1: missing column 'd'"),
        ("deployment,a,b,c,d,e\nx,1,2,3,4,5\n", "line 1: unknown column 'e'"),
        ("deployment,a,b,c,d\nx,1,2,3\n", "line 2: 4 fields"),
        ("deployment,a,b,c,d\nx,1,2,3,4\ny,1,two,3,4\n", "line 3, column 'b'"),
        ("deployment,a,b,c,d\nx,1,2,3,-4\n", "line 2, column 'd'"),
        ("deployment,a,b,c,d\nx,1,2,3,4\nx,1,2,3,4\n", "line 3, column 'deployment'"),
        ("deployment,a,b,c,d\n,1,2,3,4\n", "line 2, column 'deployment'"),
        ("deployment,a,b,c,d,stratum\nx,1,2,3,4,1\nx,1,2,3,4,1\n", "line 3, column 'stratum'"),
        ("deployment,a,b,c,d,stratum\nx,1,2,3,4,\nx,1,2,3,4,2\n", "line 3, column 'stratum'"),
        ("deployment,a,b,c,d\n", "no data rows"),
    ],
)
def test_bad_csv_exits_2_naming_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    csv = tmp_path / "bad.csv"
    csv.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    code = main(["selection", "--counts", str(csv), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and str(csv) in err
    assert not out.exists()


def test_needs_exactly_one_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selection"]) == 2
    csv = tmp_path / "t.csv"
    csv.write_text("deployment,a,b,c,d\nx,1,2,3,4\n", encoding="utf-8")
    assert main(["selection", str(tmp_path), "--counts", str(csv)]) == 2
    assert "exactly one" in capsys.readouterr().err


def test_strata_rows_sum_to_the_deployment() -> None:
    text = "deployment,stratum,a,b,c,d\nx,1,1,2,3,4\nx,2,10,20,30,40\ny,,5,5,5,5\n"
    totals, strata = parse_counts_csv(text, where="t.csv")
    assert totals == {"x": JointCounts(11, 22, 33, 44), "y": JointCounts(5, 5, 5, 5)}
    assert strata == {"x": {"1": JointCounts(1, 2, 3, 4), "2": JointCounts(10, 20, 30, 40)}}


def test_counts_with_strata_write_json_markdown_and_figures(tmp_path: Path) -> None:
    csv = tmp_path / "s.csv"
    csv.write_text(
        "deployment,a,b,c,d,stratum\n"
        "GLM-5.3,81,5,25,4,1\nGLM-5.3,51,18,27,8,2\nGLM-5.3,53,77,35,67,3\n"
        "GLM-5.3,56,57,39,71,5\nflash,85,60,73,82,\nceil,12,8,0,0,\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert main(["selection", "--counts", str(csv), "--out", str(out), "--bootstrap", "300"]) == 0
    data = orjson.loads((out / "selection.json").read_bytes())
    assert data["deployments"]["GLM-5.3"]["n"] == 674
    dec = data["strata"]["GLM-5.3"]
    assert set(dec["strata"]) == {"1", "2", "3", "5"}
    assert dec["between"] + dec["within"] == pytest.approx(dec["cov"], abs=1e-12)
    lo, hi = dec["between_share_ci"]
    assert lo < dec["between_share"] < hi
    assert "flash" not in data["strata"]
    md = (out / "selection.md").read_text(encoding="utf-8")
    assert "Ceiling controls" in md and "Covariance decomposition" in md
    for name in FIGURES:
        assert (out / name).stat().st_size > 1000
        assert f"]({name})" in md


def test_counts_without_out_or_json_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "t.csv"
    csv.write_text("deployment,a,b,c,d\nx,30,20,20,30\n", encoding="utf-8")
    assert main(["selection", "--counts", str(csv)]) == 0
    assert "x" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_run_dir_without_procedural_responses_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "results.jsonl").write_bytes(
        orjson.dumps(
            {
                "kind": "problem",
                "schema": 1,
                "task": "prompts",
                "problem_id": "p",
                "prompt": "hello",
                "system": None,
                "temperature": 0.0,
                "samples": 1,
            }
        )
        + b"\n"
    )
    assert main(["selection", str(tmp_path)]) == 2
    assert "no procedural responses" in capsys.readouterr().err


def test_run_dir_writes_to_its_eval_directory(tmp_path: Path) -> None:
    from runner.tasks.procedural import arith

    problems = [arith.generate(s, i, 0) for s in (1, 2) for i in range(3)]
    records = [p.to_record() for p in problems]
    for i, p in enumerate(problems):
        for condition in ("original", "intervened"):
            value = p.variant(condition).answer if i % 2 else p.original.answer
            records.append(
                response_record(
                    task="procedural",
                    endpoint="m",
                    problem_id=p.problem_id,
                    condition=condition,
                    text=f"Answer: {value}",
                )
            )
    stream = b"".join(orjson.dumps(r) + b"\n" for r in records) + b'{"kind": "resp'
    (tmp_path / "results.jsonl").write_bytes(stream)  # a torn last line is ignored
    assert main(["selection", str(tmp_path), "--no-figures"]) == 0
    data = orjson.loads((tmp_path / "eval" / "selection.json").read_bytes())
    # Odd problems answered both right (a); even ones repeated the original answer (b).
    assert {k: data["deployments"]["m"][k] for k in "abcd"} == {"a": 3, "b": 3, "c": 0, "d": 0}
    assert data["deployments"]["m"]["ceiling"] is True
    assert set(data["strata"]["m"]["strata"]) == {"1", "2"}
    assert (tmp_path / "eval" / "selection.md").is_file()
