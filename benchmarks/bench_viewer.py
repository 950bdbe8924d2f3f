"""The viewer at scale: page size, build time, load time and time-to-interactive.

A synthetic 10,000-problem run (``cotaudit demo --problems 10000``: generated ProntoQA problems,
three simulated reasoners, every probe, evaluated) is viewed with ``cotaudit view`` in a fresh
process (wall, CPU, peak RSS), and the page is opened in Debian's headless Chromium (selenium
and the installed chromedriver, as the tests do) several times:

- DOMContentLoaded (the HTML, data elements included, parsed), index decoded, and
  *interactive* (the first page of audits rendered and wired), from the page's own
  ``performance`` marks, measured from navigation start;
- the JS heap after load (``performance.memory``);
- the page's own render time of: next page, last page, a model filter, a verdict filter,
  and the wall time of opening a pair's comparison.

It also prints what a naive page would embed: every raw text each certificate was computed
from (not deduplicated) plus the certificates as written.

Run from the repository root::

    .venv/bin/python benchmarks/bench_viewer.py [--run RUN] [--problems 10000] [--repeat 3]

Without ``--run`` it first makes the run in a temporary directory (about 12 minutes for
10,000 problems on the 2-core development box); ``--keep DIR`` makes it there and keeps it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
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


def _cotaudit(args: list[str]) -> tuple[float, float, int]:
    """``python -m cotaudit ARGS`` in a fresh process: wall s, CPU s, peak RSS bytes."""
    started = time.perf_counter()
    child = subprocess.Popen([PYTHON, "-m", "cotaudit", *args], stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"cotaudit {' '.join(args)} failed")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def _naive_bytes(run: Path) -> int:
    """The certificates as written plus every source text of every certificate, repeated."""
    sizes: dict[str, int] = {}
    with (run / "results.jsonl").open("rb") as handle:
        for line in handle:
            if b'"kind":"response"' not in line[:40]:
                continue
            record = orjson.loads(line)
            sizes[record["request_id"]] = len((record.get("text") or "").encode())
    total = (run / "eval" / "certificates.jsonl").stat().st_size
    with (run / "eval" / "certificates.jsonl").open("rb") as handle:
        for line in handle:
            total += sum(sizes.get(rid, 0) for rid in orjson.loads(line)["sources"])
    return total


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='bench-viewer-')}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def _wait(driver: Any, script: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for: {script}")


LOAD_FIGURES = """
const nav = performance.getEntriesByType('navigation')[0];
const mark = (name) => performance.getEntriesByName(name)[0].startTime;
return {dcl: nav.domContentLoadedEventEnd, index: mark('cotaudit-index'),
        interactive: mark('cotaudit-interactive'),
        heap: performance.memory ? performance.memory.usedJSHeapSize : null,
        elements: document.getElementsByTagName('*').length};
"""


def _render(driver: Any, action: str) -> tuple[float, float]:
    """Run JS ``action``; wait for the page's next render: (page's render ms, wall ms)."""
    before = driver.execute_script("return document.body.dataset.renders")
    started = time.perf_counter()
    driver.execute_script(action)
    _wait(driver, f"return document.body.dataset.renders !== {orjson.dumps(before).decode()}")
    wall = (time.perf_counter() - started) * 1000
    return float(driver.execute_script("return document.body.dataset.renderMs")), wall


ACTIONS = {
    "next page": "document.querySelector('#pager-top button[data-go=next]').click()",
    "last page": "document.querySelector('#pager-top button[data-go=last]').click()",
    "model filter": "const s = document.getElementById('f-model'); s.value = '1';"
    " s.dispatchEvent(new Event('change', {bubbles: true}));",
    "verdict filter": "const s = document.getElementById('f-verdict'); s.value = '0';"
    " s.dispatchEvent(new Event('change', {bubbles: true}));",
}


def bench_browser(page: Path, repeat: int) -> None:
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        print("browser: skipped (apt-get install chromium chromium-driver)")
        return
    driver = _browser()
    try:
        loads = []
        for _ in range(repeat):
            driver.get(page.resolve().as_uri())
            _wait(driver, "return performance.getEntriesByName('cotaudit-interactive').length")
            loads.append(driver.execute_script(LOAD_FIGURES))
        for run, figures in enumerate(loads, start=1):
            heap = figures["heap"] / 2**20 if figures["heap"] else float("nan")
            print(
                f"load {run}: DOMContentLoaded {figures['dcl']:.0f} ms, index decoded "
                f"{figures['index']:.0f} ms, interactive {figures['interactive']:.0f} ms; "
                f"JS heap {heap:.1f} MiB, {figures['elements']:,} DOM elements"
            )
        print(
            "median: DOMContentLoaded "
            f"{statistics.median(f['dcl'] for f in loads):.0f} ms, interactive "
            f"{statistics.median(f['interactive'] for f in loads):.0f} ms"
        )
        for name, action in ACTIONS.items():
            page_ms, wall_ms = _render(driver, action)
            print(f"{name}: rendered in {page_ms:.0f} ms ({wall_ms:.0f} ms wall via WebDriver)")
        started = time.perf_counter()
        driver.execute_script("document.querySelector('article.audit button.pair').click()")
        _wait(driver, "return document.getElementById('pair-dialog').dataset.pair")
        print(f"open a pair's comparison: {(time.perf_counter() - started) * 1000:.0f} ms wall")
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="an evaluated run (default: make one)")
    parser.add_argument("--problems", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="page loads to time")
    parser.add_argument("--keep", type=Path, help="make the run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as tmp:
        work = Path(tmp)
        run = args.run
        if run is None:
            out = args.keep or work / "demo"
            wall, cpu, _ = _cotaudit(
                ["demo", "--problems", str(args.problems), "--out", str(out), "--quiet"]
            )
            run = out / "run"
            print(f"made the run: {args.problems:,} problems in {wall:.0f} s ({cpu:.0f} s CPU)")
        page = work / "view.html"
        wall, cpu, rss = _cotaudit(["view", str(run), "--out", str(page)])
        report = orjson.loads((run / "eval" / "report.json").read_bytes())
        problems = max(m["accuracy"]["problems"] for m in report["models"].values())
        stream = (run / "results.jsonl").stat().st_size
        certificates = (run / "eval" / "certificates.jsonl").stat().st_size
        print(
            f"run: {problems:,} problems x {len(report['models'])} models; results.jsonl "
            f"{stream / 2**20:,.0f} MiB, certificates.jsonl {certificates / 2**20:,.0f} MiB"
        )
        size = page.stat().st_size
        print(
            f"cotaudit view: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss / 2**30:.2f} GiB; "
            f"page {size / 2**20:.1f} MiB"
        )
        naive = _naive_bytes(run)
        print(
            f"a naive page (every source text per certificate + the certificates): "
            f"{naive / 2**20:,.0f} MiB, {naive / size:.0f}x this page"
        )
        bench_browser(page, args.repeat)


if __name__ == "__main__":
    main()
