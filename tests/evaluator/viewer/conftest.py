"""Fixtures of the viewer's tests: real evaluated runs, and a real headless Chromium.

- ``demo_run`` (session): ``cotaudit demo`` on 12 problems (three simulated reasoners), made
  once per session: a real run directory with ``eval/``.
- ``failed_run`` (session): a copy of ``demo_run`` whose ``restating`` original on the first
  problem failed (HTTP 500, no text) and whose ``faithful`` consistent probe of P1 on it
  returned an empty text, evaluated again.
- ``restarted_run`` (session): a copy of ``demo_run`` whose ``faithful`` original on the first
  problem restarts its chain (writes "Step 1" to "Step 3" twice), evaluated again.
- ``gpt4o_run`` (session): the paper's GPT-4o evidence pack imported and evaluated (skips with
  its reason where ``../shared/data`` lacks the pack).
- ``browser`` (session): Debian's ``chromium`` in headless mode driven by selenium through the
  installed ``chromedriver`` (never Selenium Manager, which would download one). Skips with a
  printed reason where the browser, the driver or selenium is absent. Started with the flags
  that keep it off the network (docs/viewer.md), and with the performance log on, so a test
  can list every request the page made.
- ``shots``: where a test saves screenshots: its tmp dir, and ``$COTAUDIT_SCREENSHOTS`` too
  when set.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
DEMO_PROBLEMS = 12


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, evaluated run of the three simulated reasoners on 12 problems."""
    out = tmp_path_factory.mktemp("viewer-demo") / "demo"
    args = ["demo", "--out", str(out), "--problems", str(DEMO_PROBLEMS), "--quiet"]
    code = main([*args, "--no-figures"])  # the page shows no figure
    assert code == 0
    return out / "run"


FAILED_MESSAGE = "HTTP 500 from the server"


@pytest.fixture(scope="session")
def failed_run(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``demo_run`` with one failed original request and one empty (successful) probe text."""
    run = tmp_path_factory.mktemp("viewer-failed") / "failed" / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("eval"))
    stream = run / "results.jsonl"
    records = [orjson.loads(line) for line in stream.read_bytes().splitlines()]
    first = next(r["problem_id"] for r in records if r["kind"] == "problem")
    failed = f"restating/{first}/original/-/0"
    empty = f"faithful/{first}/consistent/P1/0"
    for record in records:
        if record.get("request_id") == failed:
            record["text"] = None
            record["error"] = {
                "type": "ServerError",
                "status": 500,
                "message": FAILED_MESSAGE,
                "body": "",
                "attempts": 1,
            }
        elif record.get("request_id") == empty:
            record["text"] = ""
    stream.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert main(["evaluate", str(run), "--no-figures", "--n-boot", "0", "--quiet"]) == 0
    return run


RESTARTED = "faithful"


@pytest.fixture(scope="session")
def restarted_run(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``demo_run`` with a restarted chain: one original writes each of its steps twice."""
    run = tmp_path_factory.mktemp("viewer-restarted") / "restarted" / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("eval"))
    stream = run / "results.jsonl"
    records = [orjson.loads(line) for line in stream.read_bytes().splitlines()]
    first = next(r["problem_id"] for r in records if r["kind"] == "problem")
    for record in records:
        if record.get("request_id") == f"{RESTARTED}/{first}/original/-/0":
            steps, answer = record["text"].rsplit("\n\nAnswer:", 1)
            record["text"] = f"{steps}\nLet me restate the chain.\n{steps}\n\nAnswer:{answer}"
    stream.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert main(["evaluate", str(run), "--no-figures", "--n-boot", "0", "--quiet"]) == 0
    return run


@pytest.fixture(scope="session")
def gpt4o_run(tmp_path_factory: pytest.TempPathFactory, pack_dir: Path) -> Path:
    """The GPT-4o evidence pack imported as a run and evaluated."""
    run = tmp_path_factory.mktemp("viewer-gpt4o") / "gpt-4o"
    assert main(["import-evidence", str(pack_dir), "--model", "gpt-4o", "--out", str(run)]) == 0
    assert main(["evaluate", str(run), "--no-figures", "--n-boot", "1000"]) == 0
    return run


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium session (selenium WebDriver), or a skip with its reason."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.is_file():
            pytest.skip(f"{path} not found: apt-get install {package} (.ci/run does)")
    profile = tempfile.mkdtemp(prefix="cotaudit-chromium-")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Any, str], Path]:
    """``shots(driver_or_element, name)`` saves a PNG and returns its path."""
    extra = os.environ.get("COTAUDIT_SCREENSHOTS")

    def save(target: Any, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        if hasattr(target, "save_screenshot"):  # the window as it is
            target.save_screenshot(str(path))
        else:  # one element, whole: a window as tall as it, scrolled to its top
            driver = target.parent
            width = driver.get_window_size()["width"]
            height = driver.execute_script(
                "return Math.ceil(arguments[0].getBoundingClientRect().height);", target
            )
            driver.set_window_size(width, max(600, min(int(height) + 160, 12_000)))
            driver.execute_script(
                "window.scrollTo(0, arguments[0].getBoundingClientRect().top + window.scrollY);",
                target,
            )
            target.screenshot(str(path))
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(extra) / path.name)
        return path

    return save
