"""``cotaudit view`` as a user runs it: where the page goes, what it prints, bad input, --serve."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from evaluator.viewer import page as page_module
from evaluator.viewer.data import build_page_data
from evaluator.viewer.page import write_page
from tests.ctrl_c import sigint_as_a_terminal_sends_it


def test_view_writes_the_page_beside_the_run_and_prints_its_path(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    assert main(["view", str(run)]) == 0
    out, err = capsys.readouterr()
    page = run / "eval" / "view.html"
    assert out.strip() == str(page)
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    models = len(report["models"])
    problems = sum(m["accuracy"]["problems"] for m in report["models"].values())
    assert f"{models} models, {problems} audits" in err
    text = page.read_text(encoding="utf-8")
    assert '<meta http-equiv="Content-Security-Policy"' in text
    assert 'id="d-index"' in text and 'id="d-0"' in text
    assert "http://" not in text.replace("http://www.w3.org", "")  # nothing to fetch


def test_a_report_whose_model_section_is_not_an_object_is_refused_naming_it(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    path = run / "eval" / "report.json"
    report = orjson.loads(path.read_bytes())
    first = next(iter(report["models"]))
    report["models"][first] = ["edited"]
    path.write_bytes(orjson.dumps(report))
    assert main(["view", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: not a report of cotaudit evaluate: model {first} is not an object" in err
    assert "Traceback" not in err and not (run / "eval" / "view.html").exists()


def test_two_runs_default_to_a_page_named_after_the_others(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a" / "run", tmp_path / "b" / "run"
    shutil.copytree(demo_run, first)
    shutil.copytree(demo_run, second)
    assert main(["view", str(first), str(second)]) == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == first / "eval" / "view-with-b_run.html" and page.is_file()
    assert not (first / "eval" / "view.html").exists()  # the run's own page is left alone


def test_an_unevaluated_run_exits_2_and_writes_nothing(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "fresh"
    run.mkdir()
    shutil.copy(demo_run / "results.jsonl", run)
    assert main(["view", str(run), "--out", str(tmp_path / "v.html")]) == 2
    err = capsys.readouterr().err
    assert "no eval/report.json" in err and f"cotaudit evaluate {run}" in err
    assert not (tmp_path / "v.html").exists()


def test_bad_flags_exit_2(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(demo_run), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # refused as typed, before the page is built
        main(["view", str(demo_run), "--serve", "--port", "99999"])
    assert info.value.code == 2
    assert "--port: must be an integer in [0, 65535], got 99999" in capsys.readouterr().err


def test_a_failed_write_leaves_neither_page_nor_temporary_file(
    demo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = build_page_data([demo_run])
    page = tmp_path / "view.html"
    page.write_text("the previous page", encoding="utf-8")

    def broken(_data: object) -> object:
        yield b"\x1f\x8b"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(page_module, "iter_encoded", broken)
    with pytest.raises(OSError):
        write_page(page, data, title="t")
    assert page.read_text(encoding="utf-8") == "the previous page"
    assert [p.name for p in tmp_path.iterdir()] == ["view.html"]


def test_serve_serves_the_page_on_loopback_until_interrupted(
    demo_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "served.html"
    with subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "view", str(demo_run), "--out", str(out), "--serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=sigint_as_a_terminal_sends_it,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == str(out)
            line = child.stdout.readline()
            match = re.match(r"serving (http://127\.0\.0\.1:\d+/served\.html) ", line)
            assert match, line
            with urllib.request.urlopen(match.group(1), timeout=10) as response:
                assert response.read() == out.read_bytes()
        finally:
            child.send_signal(signal.SIGINT)
            child.communicate(timeout=10)
    assert child.returncode == 0


def test_view_is_listed_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "view" in capsys.readouterr().out


def test_a_port_in_use_is_refused_before_anything_is_written(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = tmp_path / "v.html"
        assert main(["view", str(demo_run), "--out", str(out), "--serve", "--port", str(port)]) == 2
    assert "cannot serve on 127.0.0.1" in capsys.readouterr().err
    assert not out.exists()
