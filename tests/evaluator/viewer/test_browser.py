"""The viewer page in a real headless Chromium: what a person sees, clicks and filters.

Every expected value comes from the run's own files (report.json, certificates.jsonl,
results.jsonl), never from the page's data, so the page is checked against what evaluate
wrote. Screenshots go to each test's tmp dir (and ``$COTAUDIT_SCREENSHOTS``).
"""

from __future__ import annotations

import copy
import gzip
import http.server
import io
import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from cotaudit.cli import main
from evaluator.canon import split_steps
from evaluator.stage_records import PROBE_CONDITIONS
from evaluator.viewer.data import PageData, build_page_data
from evaluator.viewer.page import write_page

WAIT_S = 20.0


def _view(runs: list[Path], out: Path) -> Path:
    assert main(["view", *map(str, runs), "--out", str(out)]) == 0
    return out


def _wait(browser: Any, condition: Callable[[Any], Any]) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S).until(condition)


def _open(browser: Any, page: Path) -> None:
    browser.set_window_size(1400, 1000)
    browser.get(page.resolve().as_uri())
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    browser.get_log("performance")  # start each test's request log empty


def _renders(browser: Any) -> str:
    return str(browser.execute_script("return document.body.dataset.renders || ''"))


def _act(browser: Any, action: Callable[[], None]) -> None:
    """Do ``action`` and wait until the page has rendered its result."""
    before = _renders(browser)
    action()
    _wait(browser, lambda d: _renders(d) != before)


def _select(browser: Any, element_id: str, label: str) -> None:
    from selenium.webdriver.support.ui import Select

    _act(
        browser,
        lambda: Select(browser.find_element("id", element_id)).select_by_visible_text(label),
    )


def _css(root: Any, selector: str) -> list[Any]:
    return list(root.find_elements("css selector", selector))


def _report(run: Path) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads((run / "eval" / "report.json").read_bytes())
    return report


def _certificates(run: Path) -> list[dict[str, Any]]:
    lines = (run / "eval" / "certificates.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def _texts(run: Path) -> dict[str, str]:
    out = {}
    for line in (run / "results.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["kind"] == "response":
            out[record["request_id"]] = record["text"]
    return out


@pytest.fixture(scope="module")
def demo_page(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _view([demo_run], tmp_path_factory.mktemp("page") / "view.html")


def _model_columns(browser: Any) -> list[str]:
    heads = _css(browser, "#models thead th.model")
    return [h.text.splitlines()[0] for h in heads]


# What the models table shows, read in one call: {row key: [per model column: {name: text}]}
# where a name is a figure's data-metric / data-value, and "text" the whole cell, as rendered
# (innerText: what a person sees; a hidden row reads as "").
READ_TABLE = """
const out = {};
for (const tr of document.querySelectorAll('#models tr[data-key]')) {
  out[tr.dataset.key] = [...tr.querySelectorAll('td')].map((td) => {
    const cell = {text: td.innerText};
    for (const el of td.querySelectorAll('[data-metric], [data-value]')) {
      cell[el.dataset.metric || el.dataset.value] = el.innerText;
    }
    return cell;
  });
}
return out;
"""


def _table(browser: Any) -> dict[str, list[dict[str, str]]]:
    table: dict[str, list[dict[str, str]]] = browser.execute_script(READ_TABLE)
    return table


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def _check_table_against_report(browser: Any, report: dict[str, Any]) -> int:
    """Every P/R/F1 (with CI) row and count the table shows equals report.json's."""
    models = report["models"]
    assert _model_columns(browser) == list(models)
    more = _css(browser, "#more-rows")
    if more:
        more[0].click()
        _wait(browser, lambda d: _css(d, "#models.show-more"))
    table = _table(browser)
    checked = 0
    for column, section in enumerate(models.values()):
        for key, row in section["rows"].items():
            if key not in table:
                continue  # the viewer shows a chosen set of rows
            cell = table[key][column]
            for metric in ("f1", "precision", "recall"):
                assert cell[metric] == _fmt(row[metric]), (key, metric)
                ci = row["ci"] if metric == "f1" else row[f"ci_{metric}"]
                assert cell[f"{metric}-ci"] == f"[{_fmt(ci[0])}, {_fmt(ci[1])}]", (key, metric)
                checked += 1
            assert f"tp {row['tp']:,} · fp {row['fp']:,} · fn {row['fn']:,}" in cell["text"]
        assert table["accuracy"][column]["correct"] == f"{section['accuracy']['correct']:,}"
        assert table["rawr_consistent"][column]["rawr"] == f"{section['rawr']['rawr']:,}"
        for condition, rate in section["parse_rates"].items():
            assert table["parse_rates"][column][f"parse-{condition}"] == _fmt(rate)
        total = section["certificates"]["total"]
        assert table["certificates"][column]["total"] == f"{total:,}"
    return checked


def test_the_tables_numbers_equal_report_json(
    browser: Any, demo_page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    _open(browser, demo_page)
    report = _report(demo_run)
    assert _check_table_against_report(browser, report) >= 3 * 3 * 9
    # Under A alone, what the audit found is the report's A row: ignored uses are its false
    # negatives, dependent ones its true positives, RAWR its rawr.
    _select(
        browser,
        "f-evaluator",
        "A: consistent probe (predicate renamed in every premise), surface control",
    )
    table = _table(browser)
    for column, section in enumerate(report["models"].values()):
        row = section["rows"]["A_consistent_full"]
        assert table["grounded"][column]["ignored"] == f"{row['fn']:,}"
        assert table["grounded"][column]["dependent"] == f"{row['tp']:,}"
        assert table["rawr"][column]["rawr"] == f"{section['rawr']['rawr']:,}"
        assert table["rawr"][column]["rawr-rule"] == f"{section['rawr']['predicate']:,}"
    legend = browser.find_element("id", "summary-legend").text
    assert "entity-introduction premise" in legend and "every" in legend
    shots(browser.find_element("id", "summary"), "summary")


def test_the_header_names_the_run_once(
    browser: Any,
    demo_run: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shots: Callable[[Any, str], Path],
) -> None:
    # As the README has it: `cotaudit view DEMO/run` from the demo's parent directory. The
    # title names the run by its label; the line under it gives its directory (absolute, as
    # the page may be opened from anywhere), not the label again.
    monkeypatch.chdir(demo_run.parent.parent)
    relative = Path(demo_run.parent.name) / demo_run.name
    page = _view([relative], tmp_path / "view.html")
    _open(browser, page)
    label = f"{demo_run.parent.name}/{demo_run.name}"
    assert browser.find_element("css selector", "header.top h1").text == f"cotaudit view: {label}"
    models = _report(demo_run)["models"]
    problems = {section["accuracy"]["problems"] for section in models.values()}
    (n,) = problems
    line = browser.find_element("id", "runs").text
    written = line.rpartition(" · ")[2]
    assert line == (
        f"{demo_run.resolve()} · {n} problems, {n * len(models)} audits (a model on a "
        f"problem) · {written}"
    )
    assert written.startswith("written by cotaudit ")
    header = browser.find_element("css selector", "header.top").text
    assert header.count(label) == 2  # in the title, and inside the directory's path
    shots(browser.find_element("css selector", "header.top"), "header")


def test_a_run_short_of_its_plan_says_so_under_the_header(
    browser: Any,
    demo_run: Path,
    tmp_path: Path,
    shots: Callable[[Any, str], Path],
) -> None:
    import asyncio

    from cotaudit.commands.demo import demo_config
    from runner.engine import run_sweep

    page = _view([demo_run], tmp_path / "complete.html")
    _open(browser, page)
    assert not browser.find_element("id", "incomplete").is_displayed()
    # A run interrupted between problems: its last problem never reached the stream.
    config = demo_config(tmp_path / "short", problems=3, seed=0)
    assert asyncio.run(run_sweep(config, progress=False, preflight=True)).errors == 0
    run = config.run_dir
    stream = run / "results.jsonl"
    records = [orjson.loads(line) for line in stream.read_bytes().splitlines()]
    last = [r["problem_id"] for r in records if r["kind"] == "problem"][-1]
    stream.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in records if r.get("problem_id") != last)
    )
    assert main(["evaluate", str(run), "--no-figures", "--n-boot", "0", "--quiet"]) == 0
    held = _report(run)["stream"]["responses"]
    planned = orjson.loads((run / "manifest.json").read_bytes())["planned_requests"]
    page = _view([run], tmp_path / "short.html")
    _open(browser, page)
    note = browser.find_element("id", "incomplete")
    assert note.is_displayed()
    assert note.text.startswith(
        f"Incomplete run: the stream holds {sum(held.values()):,} of the "
        f"{sum(planned.values()):,} responses its run plans"
    )
    shots(browser.find_element("css selector", "header.top"), "header-incomplete")


def test_a_click_on_a_pair_shows_both_chains_with_the_changed_conclusion(
    browser: Any, demo_page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    # A gold pair whose step changed under the consistent probe: GROUNDED.
    cert = next(
        c
        for c in _certificates(demo_run)
        if c["endpoint"] == "shortcut"
        and c["gold"]["direct_parent"]
        and c["delta"]["consistent"] is True
        and c["cot_step"] > 1
    )
    texts = _texts(demo_run)
    original_rid = next(r for r in cert["sources"] if "/original/" in r)
    probe_rid = next(r for r in cert["sources"] if "/consistent/" in r)
    _open(browser, demo_page)
    _select(browser, "f-model", "shortcut")
    field = browser.find_element("id", "f-problem")
    _act(browser, lambda: field.send_keys(cert["problem_id"]))
    (article,) = _css(browser, "article.audit")
    button = article.find_element("css selector", f'button.pair[title="{cert["id"]}"]')
    assert button.find_element("css selector", ".verdict").text == cert["verdict"]
    assert cert["sha256"].startswith(button.find_element("css selector", ".seal").text)
    button.click()
    dialog = _wait(browser, lambda d: d.find_element("id", "pair-dialog"))
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == cert["id"])
    assert dialog.get_attribute("open") is not None
    # Both chains, step by step, the original on the left and the probe's on the right.
    left = [e.text for e in _css(dialog, ".sxs-row:not(.sxs-head):not(.answers) .side.orig")]
    right = [e.text for e in _css(dialog, ".sxs-row:not(.sxs-head):not(.answers) .side.probe")]
    for step in split_steps(texts[original_rid]):
        assert f"Step {step.number} {step.text}" in left
    for step in split_steps(texts[probe_rid]):
        assert f"Step {step.number} {step.text}" in right
    # The aligned steps share a row; the clicked one is marked, its change highlighted.
    focus = dialog.find_element("css selector", ".sxs-row.focus")
    assert focus.get_attribute("data-step") == str(cert["cot_step"])
    assert focus.get_attribute("data-probe-step") == str(cert["probe_steps"]["consistent"])
    assert "changed" in focus.get_attribute("class").split()
    renamed = next(iter(cert["substitution"].values()))
    inserted = [m.text for m in _css(focus, ".side.probe mark.ins")]
    assert any(renamed in word for word in inserted), inserted
    conclusion = focus.find_element("css selector", ".conclusion.changed").text
    assert "conclusion changed" in conclusion
    assert cert["phi"]["consistent"].replace(" ", "") in conclusion.replace(" ", "")
    assert cert["sha256"][:16] in dialog.text
    shots(browser, "pair-dialog")
    # Another probe: its tab shows that probe's text and its own verdict on the step.
    surface = dialog.find_element("css selector", 'button.tab[data-condition="2"]')
    surface.click()
    _wait(browser, lambda d: _css(d, '.sxs[data-condition="surface"]'))
    surface_rid = next(r for r in cert["sources"] if "/surface/" in r)
    right = [e.text for e in _css(dialog, ".sxs-row:not(.sxs-head):not(.answers) .side.probe")]
    assert f"Step 1 {split_steps(texts[surface_rid])[0].text}" in right
    browser.find_element("id", "pair-close").click()
    _wait(browser, lambda d: d.find_element("id", "pair-dialog").get_attribute("open") is None)


def test_a_vanished_conclusion_reads_as_a_change(
    browser: Any, demo_page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    cert = next(
        c
        for c in _certificates(demo_run)
        if c["endpoint"] == "faithful"
        and c["decision_rule"] == "R_GROUNDED_VANISHED"
        and c["gold"]["direct_parent"]
    )
    _open(browser, demo_page)
    _select(browser, "f-model", "faithful")
    field = browser.find_element("id", "f-problem")
    _act(browser, lambda: field.send_keys(cert["problem_id"]))
    browser.find_element("css selector", f'button.pair[title="{cert["id"]}"]').click()
    dialog = _wait(browser, lambda d: d.find_element("id", "pair-dialog"))
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == cert["id"])
    local = dialog.find_element("css selector", 'button.tab[data-condition="1"]')
    assert "vanished" in local.text
    local.click()
    _wait(browser, lambda d: _css(d, '.sxs[data-condition="local"]'))
    focus = dialog.find_element("css selector", ".sxs-row.focus")
    text = focus.find_element("css selector", ".conclusion").text
    assert "conclusion vanished" in text and "read as a change" in text
    assert cert["phi"]["original"].replace(" ", "") in text.replace(" ", "")
    shots(browser, "pair-dialog-vanished")
    browser.find_element("id", "pair-close").click()


# Read in one call each (one WebDriver round trip per element is slow): what is rendered.
def _visible_verdicts(browser: Any) -> list[str]:
    verdicts: list[str] = browser.execute_script(
        "return [...document.querySelectorAll('article.audit button.pair .verdict')]"
        ".map((e) => e.innerText);"
    )
    return verdicts


def _shown_audits(browser: Any) -> list[tuple[str, str]]:
    shown = browser.execute_script(
        "return [...document.querySelectorAll('article.audit')]"
        ".map((a) => [a.dataset.model, a.dataset.problem]);"
    )
    return [(model, problem) for model, problem in shown]


def _shown_pairs(browser: Any) -> list[dict[str, Any]]:
    pairs: list[dict[str, Any]] = browser.execute_script(
        "return [...document.querySelectorAll('article.audit button.pair')].map((b) => ({"
        "id: b.title, marks: [...b.querySelectorAll('.mark')].map((m) => m.innerText)}));"
    )
    return pairs


def _matching(browser: Any) -> int:
    return int(browser.find_element("css selector", "#pager-top .matching").text.replace(",", ""))


def test_each_filter_hides_what_it_should_and_shows_the_rest(
    browser: Any, demo_page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    certs = _certificates(demo_run)
    report = _report(demo_run)
    every = {(c["endpoint"], c["problem_id"]) for c in certs}
    _open(browser, demo_page)
    _select(browser, "f-size", "100")
    assert set(_shown_audits(browser)) == every and _matching(browser) == len(every)

    # By verdict (of the default evaluator, A+A'): only GROUNDED pairs, in the audits with one.
    _select(browser, "f-verdict", "GROUNDED")
    grounded = {(c["endpoint"], c["problem_id"]) for c in certs if c["verdict"] == "GROUNDED"}
    assert set(_shown_audits(browser)) == grounded
    shown = _visible_verdicts(browser)
    assert shown and set(shown) == {"GROUNDED"}
    assert len(shown) == sum(1 for c in certs if c["verdict"] == "GROUNDED")
    _select(browser, "f-verdict", "any")

    # By model.
    _select(browser, "f-model", "restating")
    assert {m for m, _ in _shown_audits(browser)} == {"restating"}
    assert _matching(browser) == report["models"]["restating"]["accuracy"]["problems"]
    _select(browser, "f-model", "all")

    # Right answer, wrong reasoning, under A: exactly the report's RAWR problems.
    _select(
        browser,
        "f-evaluator",
        "A: consistent probe (predicate renamed in every premise), surface control",
    )
    checkbox = browser.find_element("id", "f-rawr")
    _act(browser, checkbox.click)
    expected = {
        (model, problem)
        for model, section in report["models"].items()
        for problem in section["rawr"]["problems"]
    }
    assert set(_shown_audits(browser)) == expected
    assert all(_css(a, ".badge.rawr") for a in _css(browser, "article.audit"))
    _act(browser, checkbox.click)

    # False positives under A: exactly the report's false_positives, each marked FP.
    checkbox = browser.find_element("id", "f-fp")
    _act(browser, checkbox.click)
    fps = {fp["id"] for s in report["models"].values() for fp in s["false_positives"]}
    pairs = _shown_pairs(browser)
    assert {p["id"] for p in pairs} == fps and len(pairs) == len(fps)
    assert all("FP" in p["marks"] for p in pairs)
    shots(browser, "filter-false-positives")
    _act(browser, checkbox.click)
    assert set(_shown_audits(browser)) == every


# Each rendered cell: its certificate id, classes and the colour a person sees.
READ_CELLS = """
return [...document.querySelectorAll('article.audit button.pair')].map((b) => ({
  id: b.title,
  classes: [...b.classList],
  colour: getComputedStyle(b.querySelector('.verdict')).color,
}));
"""


def test_expected_cells_are_muted_and_alarms_stand_out(
    browser: Any, demo_page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    certs = {c["id"]: c for c in _certificates(demo_run)}
    _open(browser, demo_page)
    _select(browser, "f-size", "100")
    cells = browser.execute_script(READ_CELLS)
    assert cells
    colours: dict[str, set[str]] = {"expected": set(), "ignored": set(), "fp": set()}
    for cell in cells:
        cert = certs[cell["id"]]
        gold = cert["gold"]["direct_parent"]
        evaluable = not cert["excluded"]
        verdict = cert["verdict"]  # the page's default evaluator: A+A'
        expected = not gold and evaluable and verdict in ("INSENSITIVE", "CASCADE")
        assert ("expected" in cell["classes"]) == expected, cell
        if expected:
            colours["expected"].add(cell["colour"])
        if gold and evaluable and verdict == "INSENSITIVE":
            colours["ignored"].add(cell["colour"])
        if not gold and evaluable and verdict in ("GROUNDED", "INPUT-SENSITIVE"):
            assert "fp" in cell["classes"]
            colours["fp"].add(cell["colour"])
    # A muted INSENSITIVE is not the alarm red of an ignored gold premise.
    assert colours["expected"] and colours["ignored"]
    assert not colours["expected"] & colours["ignored"]
    shortcut = next(
        a
        for a in _css(browser, "article.audit")
        if a.get_attribute("data-model") == "shortcut" and _css(a, ".pair.gold.v2")
    )
    shots(shortcut, "problem-grid")


def _tiled(data: PageData, copies: int) -> PageData:
    """``data`` repeated ``copies`` times under new problem ids: a large run's page data."""
    index = copy.deepcopy(data.index)
    audits = data.index["audits"]
    n_audits, n_chunks = len(audits["model"]), len(data.chunks)
    n_problems = len(data.index["problems"])
    index["problems"] = [f"{p}-t{k}" for k in range(copies) for p in data.index["problems"]]
    for name, values in audits.items():
        tiled: list[Any] = []
        for k in range(copies):
            if name == "chunk":
                tiled.extend(v + k * n_chunks for v in values)
            elif name == "problem":
                tiled.extend(v + k * n_problems for v in values)
            else:
                tiled.extend(values)
        index["audits"][name] = tiled
    chunks = []
    decoded = [data.chunk(c) for c in range(n_chunks)]
    for k in range(copies):
        for chunk in decoded:
            clone = copy.copy(chunk)
            clone["audits"] = [{**a, "audit": a["audit"] + k * n_audits} for a in chunk["audits"]]
            clone["problems"] = [{**p, "id": f"{p['id']}-t{k}"} for p in chunk["problems"]]
            # Level 1: the page reads any gzip, and the test need not pay for level 6.
            chunks.append(gzip.compress(orjson.dumps(clone), compresslevel=1))
    return PageData(index=index, chunks=chunks)


def test_paging_on_a_large_run_keeps_the_dom_to_one_page(
    browser: Any, demo_run: Path, tmp_path: Path, shots: Callable[[Any, str], Path]
) -> None:
    data = build_page_data([demo_run], chunk_audits=12)
    copies = math.ceil(30_000 / len(data.index["audits"]["model"]))  # 10,000 problems x 3 models
    big = _tiled(data, copies)
    n = len(big.index["audits"]["model"])
    page = tmp_path / "large.html"
    write_page(page, big, title="large")
    _open(browser, page)
    assert len(_css(browser, "article.audit")) == 20
    assert _matching(browser) == n
    pages = math.ceil(n / 20)
    assert browser.find_element("css selector", "#pager-top .pages").text == f"{pages:,}"
    problems = big.index["problems"]
    models = [m["label"] for m in big.index["models"]]

    def expected(page_number: int) -> list[tuple[str, str]]:
        rows = range((page_number - 1) * 20, min(n, page_number * 20))
        return [
            (models[big.index["audits"]["model"][i]], problems[big.index["audits"]["problem"][i]])
            for i in rows
        ]

    _act(browser, browser.find_element("css selector", '#pager-top button[data-go="last"]').click)
    assert _shown_audits(browser) == expected(pages)
    from selenium.webdriver.common.keys import Keys

    box = browser.find_element("css selector", "#pager-top .page-input")
    _act(browser, lambda: box.send_keys(Keys.CONTROL, "a", Keys.NULL, "700", Keys.ENTER))
    assert _shown_audits(browser) == expected(700)
    _act(browser, browser.find_element("css selector", '#pager-top button[data-go="next"]').click)
    assert _shown_audits(browser) == expected(701)
    assert len(_css(browser, "article.audit")) == 20
    # The DOM holds one page whatever the run's size.
    assert browser.execute_script("return document.getElementsByTagName('*').length") < 20_000
    _select(browser, "f-model", models[1])
    assert _matching(browser) == n // len(models)  # every model audited the same problems
    shots(browser, "large-run")


class _CountingHandler(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # keep the test output clean
        pass


@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    handler = type("Handler", (_CountingHandler,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_the_page_makes_no_network_request(
    browser: Any, demo_page: Path, counting_server: tuple[str, list[str]]
) -> None:
    _open(browser, demo_page)
    _act(browser, browser.find_element("css selector", '#pager-top button[data-go="next"]').click)
    browser.find_element("css selector", "article.audit button.pair").click()
    _wait(browser, lambda d: d.find_element("id", "pair-dialog").get_attribute("data-pair"))
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    requests = [
        orjson.loads(entry["message"])["message"] for entry in browser.get_log("performance")
    ]
    sent = [
        m["params"]["request"]["url"]
        for m in requests
        if m["method"] == "Network.requestWillBeSent"
    ]
    assert all(url.startswith("file://") for url in sent), sent
    # Even markup injected into the page cannot reach a server: the CSP forbids it.
    base, hits = counting_server
    browser.execute_script(
        """
        window.violations = 0;
        document.addEventListener('securitypolicyviolation', () => { window.violations += 1; });
        const img = document.createElement('img'); img.src = arguments[0] + '/pixel';
        document.body.appendChild(img);
        fetch(arguments[0] + '/fetch').catch(() => {});
        """,
        base,
    )
    _wait(browser, lambda d: d.execute_script("return window.violations") >= 2)
    assert hits == []
    csp = browser.find_element("css selector", 'meta[http-equiv="Content-Security-Policy"]')
    assert "default-src 'none'" in csp.get_attribute("content")


def test_two_runs_side_by_side(
    browser: Any, demo_run: Path, tmp_path: Path, shots: Callable[[Any, str], Path]
) -> None:
    import shutil

    other = tmp_path / "second" / "run"
    shutil.copytree(demo_run, other)
    page = _view([demo_run, other], tmp_path / "both.html")
    _open(browser, page)
    columns = _model_columns(browser)
    per_run = len(orjson.loads((demo_run / "eval" / "report.json").read_bytes())["models"])
    assert len(columns) == 2 * per_run and len(set(columns)) == 2 * per_run
    assert "faithful (second/run)" in columns
    assert "second/run" in browser.find_element("id", "runs").text
    shots(browser.find_element("id", "summary"), "two-runs")


def test_the_gpt4o_pack_table_equals_its_report(
    browser: Any, gpt4o_run: Path, tmp_path: Path, shots: Callable[[Any, str], Path]
) -> None:
    page = _view([gpt4o_run], tmp_path / "gpt4o.html")
    _open(browser, page)
    assert _check_table_against_report(browser, _report(gpt4o_run)) >= 9
    (first,) = _css(browser, "article.audit:first-child")
    assert first.get_attribute("data-problem") == "p001"
    shots(browser.find_element("id", "summary"), "gpt4o-summary")
    shots(first, "gpt4o-first-problem")


# Where each visible row's name is, against the scrolled table's left edge, and whether it is
# what a person sees there (not a figure painted over it).
READ_ROW_NAMES = """
const wrap = document.getElementById('summary-table');
wrap.scrollLeft = wrap.scrollWidth;
const edge = wrap.getBoundingClientRect().left;
return [...document.querySelectorAll('#models tbody tr[data-key] th[scope=row]')]
  .filter((th) => th.getBoundingClientRect().height > 0)
  .map((th) => {
    const r = th.getBoundingClientRect();
    const inView = r.top >= 0 && r.top + 12 < window.innerHeight;
    const seen = inView ? document.elementFromPoint(edge + 4, r.top + 12) : null;
    return {key: th.parentElement.dataset.key, left: r.left - edge,
            seen: seen === null ? null : th.contains(seen)};
  });
"""


def test_row_names_stay_in_view_when_the_columns_scroll(
    browser: Any, demo_run: Path, tmp_path: Path, shots: Callable[[Any, str], Path]
) -> None:
    # Two runs at a narrow window: the columns scroll sideways; the row saying what a figure
    # counts must stay beside it.
    import shutil

    other = tmp_path / "second" / "run"
    shutil.copytree(demo_run, other)
    page = _view([demo_run, other], tmp_path / "both.html")
    _open(browser, page)
    browser.set_window_size(800, 900)
    assert browser.execute_script(
        "const w = document.getElementById('summary-table'); return w.scrollWidth > w.clientWidth"
    )
    rows = browser.execute_script(READ_ROW_NAMES)
    assert len(rows) >= 10
    assert all(abs(row["left"]) <= 1 for row in rows), rows
    seen = [row for row in rows if row["seen"] is not None]
    assert seen and all(row["seen"] for row in seen), seen
    # ... and nothing of the figures scrolled under it shows through: its left padding, as
    # painted, is one colour (the cell's) and its bottom border's.
    from PIL import Image

    th = browser.find_element("css selector", '#models tr[data-key="accuracy"] th')
    painted = Image.open(io.BytesIO(th.screenshot_as_png)).convert("RGB")
    colours = {painted.getpixel((x, y)) for x in range(10) for y in range(painted.height)}
    assert len(colours) <= 2, sorted(colours)
    shots(browser, "two-runs-scrolled-sideways")


def _focus(browser: Any) -> dict[str, str]:
    focused: dict[str, str] = browser.execute_script(
        "const a = document.activeElement; return {tag: a.tagName, id: a.id,"
        " go: a.dataset.go || '', condition: a.dataset.condition || '',"
        " pager: (a.closest('nav.pager') || {}).id || ''};"
    )
    return focused


def test_the_keyboard_keeps_its_place_when_the_page_re_renders(
    browser: Any, demo_page: Path, shots: Callable[[Any, str], Path]
) -> None:
    from selenium.webdriver.common.keys import Keys

    _open(browser, demo_page)
    browser.set_window_size(800, 600)  # the dialog is taller than the window: it scrolls
    more = browser.find_element("id", "more-rows")
    more.send_keys(Keys.ENTER)
    _wait(browser, lambda d: _css(d, "#models.show-more"))
    assert _focus(browser)["id"] == "more-rows"

    _select(browser, "f-size", "10")
    pages = int(browser.find_element("css selector", "#pager-top .pages").text)
    assert pages >= 4
    page_box = "#pager-top .page-input"
    top_next = browser.find_element("css selector", '#pager-top button[data-go="next"]')
    _act(browser, lambda: top_next.send_keys(Keys.ENTER))
    focused = _focus(browser)
    assert (focused["go"], focused["pager"]) == ("next", "pager-top")
    # From the bottom pager the view returns to the list's top, and the focus with it.
    bottom_next = browser.find_element("css selector", '#pager-bottom button[data-go="next"]')
    _act(browser, lambda: bottom_next.send_keys(Keys.ENTER))
    focused = _focus(browser)
    assert (focused["go"], focused["pager"]) == ("next", "pager-top")
    assert browser.find_element("css selector", page_box).get_attribute("value") == "3"
    _act(browser, lambda: browser.switch_to.active_element.send_keys(Keys.ENTER))
    assert browser.find_element("css selector", page_box).get_attribute("value") == "4"

    # A pair opened from the keyboard; its probe tabs keep the focus when they re-render.
    dialog = browser.find_element("id", "pair-dialog")
    first, second = _css(browser, "article.audit button.pair")[:2]
    first.send_keys(Keys.ENTER)
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == first.get_attribute("title"))
    surface = dialog.find_element("css selector", 'button.tab[data-condition="2"]')
    surface.send_keys(Keys.ENTER)
    _wait(browser, lambda d: _css(d, '.sxs[data-condition="surface"]'))
    focused = _focus(browser)
    assert (focused["tag"], focused["condition"]) == ("BUTTON", "2")
    tab = browser.switch_to.active_element
    assert "on" in tab.get_attribute("class").split()
    # Scrolled to its end, closed with Escape: the next pair opens at its top.
    browser.execute_script("arguments[0].scrollTop = arguments[0].scrollHeight", dialog)
    assert browser.execute_script("return arguments[0].scrollTop", dialog) > 0
    tab.send_keys(Keys.ESCAPE)
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
    assert browser.switch_to.active_element == first
    second.send_keys(Keys.ENTER)
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == second.get_attribute("title"))
    assert browser.execute_script("return arguments[0].scrollTop", dialog) == 0
    shots(browser, "pair-dialog-reopened")
    browser.find_element("id", "pair-close").click()


def test_a_failed_request_is_named_on_its_card(
    browser: Any, failed_run: Path, tmp_path: Path
) -> None:
    from tests.evaluator.viewer.conftest import FAILED_MESSAGE

    page = _view([failed_run], tmp_path / "failed.html")
    _open(browser, page)
    first = browser.find_element("css selector", "article.audit").get_attribute("data-problem")
    cards = {
        a.get_attribute("data-model"): a
        for a in _css(browser, f'article.audit[data-problem="{first}"]')
    }
    failed = cards["restating"]
    assert failed.find_element("css selector", ".request-error").text == (
        f"The model’s request failed: {FAILED_MESSAGE}"
    )
    assert "the request failed" in failed.find_element("css selector", ".answer").text
    assert not _css(cards["faithful"], ".request-error")


def test_a_restarted_chain_shows_each_of_its_steps_and_frames_the_pairs_own(
    browser: Any, restarted_run: Path, tmp_path: Path, shots: Callable[[Any, str], Path]
) -> None:
    # A chain that writes "Step 1" to "Step 3" twice: the card kept one row per step number,
    # the second occurrence's pairs in the first's cells, so half the certificates had no cell;
    # the comparison framed both rows numbered as the pair's step.
    from tests.evaluator.viewer.conftest import RESTARTED

    certs = [c for c in _certificates(restarted_run) if c["endpoint"] == RESTARTED]
    problem = next(c["problem_id"] for c in certs if c["cot_index"] != c["cot_step"])
    mine = [c for c in certs if c["problem_id"] == problem]
    page = _view([restarted_run], tmp_path / "restarted.html")
    _open(browser, page)
    _select(browser, "f-model", RESTARTED)
    field = browser.find_element("id", "f-problem")
    _act(browser, lambda: field.send_keys(problem))
    (article,) = _css(browser, "article.audit")
    titles = [b.get_attribute("title") for b in _css(article, "button.pair")]
    assert sorted(titles) == sorted(c["id"] for c in mine)
    rows = _css(article, "table.pairs tbody th.step")
    steps = sorted({(c["cot_index"], c["cot_step"], c["step_text"]) for c in mine})
    # Each step as the chain wrote it, a number written again named as such (rows, cells).
    names = [f"Step {n}" + (" (2nd time)" if k > n else "") for k, n, _ in steps]
    assert [r.find_element("css selector", "b").text for r in rows] == names
    for c in mine:
        label = article.find_element("css selector", f'button.pair[title="{c["id"]}"]')
        name = names[c["cot_index"] - 1].lower()
        assert label.get_attribute("aria-label").startswith(f"{name} × {c['premise_id']}: ")
    assert [r.find_element("css selector", ".step-text").text for r in rows] == [
        t for _, _, t in steps
    ]
    # The second occurrence of Step 1's gold pair: its own row is the one framed.
    cert = next(c for c in mine if c["cot_index"] > c["cot_step"] and c["gold"]["direct_parent"])
    article.find_element("css selector", f'button.pair[title="{cert["id"]}"]').click()
    dialog = browser.find_element("id", "pair-dialog")
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == cert["id"])
    framed = browser.execute_script(
        "return [...document.querySelectorAll('#pair-dialog .sxs-row[data-step]')]"
        ".filter((row) => row.dataset.step !== '')"  # the original's steps, in order
        ".map((row) => row.classList.contains('focus'));"
    )
    assert len(framed) == len(steps)
    assert [k + 1 for k, on in enumerate(framed) if on] == [cert["cot_index"]]
    title = browser.find_element("id", "pair-title").text
    assert title.endswith(f"Step {cert['cot_step']} (2nd time) × {cert['premise_id']}")
    shots(dialog, "restarted-chain-pair")
    browser.find_element("id", "pair-close").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)


def _two_runs_page(demo_run: Path, tmp_path: Path) -> Path:
    import shutil

    other = tmp_path / "second" / "run"
    shutil.copytree(demo_run, other)
    return _view([demo_run, other], tmp_path / "both.html")


def _wheel(browser: Any, x: int, y: int, dx: int, dy: int) -> None:
    """Turn the mouse wheel over the window's point (x, y), as a reader scrolls, and wait until
    whatever it scrolled has stopped moving."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    where = (
        "const w = document.getElementById('summary-table');"
        "return [window.scrollX, window.scrollY, w.scrollLeft, w.scrollTop];"
    )
    ActionChains(browser).scroll_from_origin(ScrollOrigin.from_viewport(x, y), dx, dy).perform()
    seen: list[Any] = [None]

    def settled(driver: Any) -> bool:
        now = driver.execute_script(where)
        done = now == seen[0]
        seen[0] = now
        return done

    _wait(browser, settled)


# Where the models table's head is, against the top of the table as the window shows it, and
# what a person sees at its cells (the head, or a figure painted over it); likewise at the
# top-left corner and just under the head, at the row names' column.
READ_HEAD = """
const wrap = document.getElementById('summary-table');
const box = wrap.getBoundingClientRect();
const top = Math.max(box.top, 0);
const head = document.querySelector('#models thead').getBoundingClientRect();
const corner = document.querySelector('#models thead tr:last-child th:first-child');
const cornerBox = corner.getBoundingClientRect();
const within = (el, x, y) => {
  const seen = document.elementFromPoint(x, y);
  return seen !== null && el.contains(seen);
};
// Down the whole height of the head (the run row and the names), every 4 px.
const downTheHead = (el, x) => {
  for (let y = head.top + 2; y < head.bottom - 1; y += 4) if (!within(el, x, y)) return false;
  return true;
};
const thead = document.querySelector('#models thead');
const names = [...document.querySelectorAll('#models thead th.model')].map((th) => {
  const r = th.getBoundingClientRect();
  const x = r.left + r.width / 2;
  const visible = x > cornerBox.right && x < box.right - 20;
  return {name: th.innerText.split('\\n')[0], visible,
          seen: visible ? within(th, x, r.top + r.height / 2) && downTheHead(thead, x) : null};
});
const under = document.elementFromPoint(box.left + 8, head.bottom + 12);
const row = (key) =>
  document.querySelector(`#models tr[data-key="${key}"]`).getBoundingClientRect();
return {
  headTop: head.top - top, headBottom: head.bottom,
  names,
  cornerSeen: within(corner, box.left + 8, cornerBox.top + cornerBox.height / 2) &&
    downTheHead(thead, box.left + 8),
  rowNameUnder: under !== null && under.closest('tbody th') !== null,
  accuracyBottom: row('accuracy').bottom,
  costTop: row('cost').top,
  innerHeight: window.innerHeight,
};
"""


def test_the_models_header_stays_on_top_when_the_table_scrolls_down(
    browser: Any, demo_run: Path, tmp_path: Path, shots: Callable[[Any, str], Path]
) -> None:
    # Two runs at 800 px: the table is longer than the window and wider than it. Scrolled down
    # with the wheel, the rows low in the table keep the model names above them; scrolled
    # sideways too, the corner cell stays over the names and the row names under it.
    page = _two_runs_page(demo_run, tmp_path)
    _open(browser, page)
    browser.set_window_size(800, 700)
    browser.execute_script(
        "window.scrollTo(0, document.getElementById('summary-table').getBoundingClientRect().top"
        " + window.scrollY)"
    )

    def check_head(sideways: bool) -> dict[str, Any]:
        head: dict[str, Any] = browser.execute_script(READ_HEAD)
        assert abs(head["headTop"]) <= 1, head  # at the top of the table as shown
        visible = [n for n in head["names"] if n["visible"]]
        assert visible and all(n["seen"] for n in visible), head["names"]
        # The first model's name goes under the corner when the columns scroll sideways ...
        assert head["names"][0]["visible"] is not sideways, head["names"]
        # ... which stays over it and over the row names, seen under it.
        assert head["cornerSeen"] and head["rowNameUnder"], head
        return head

    # Step by step, so that rows, section titles and "show more rows" each pass under the head.
    for sideways in (False, True):
        for _ in range(6):
            _wheel(browser, 400, 350, 0, 250)
            head = check_head(sideways)
        # The table did scroll down: its first row is under the head, the cost row in view.
        assert head["accuracyBottom"] <= head["headBottom"], head
        assert head["costTop"] < head["innerHeight"], head
        shots(browser, f"models-head-scrolled-down{'-and-sideways' if sideways else ''}")
        if not sideways:
            _wheel(browser, 400, 350, 3000, -3000)


# For each tp/fp/fn/tn line of the models table: on how many lines its text is laid out.
READ_COUNT_LINES = """
return [...document.querySelectorAll('#models .counts')].map((el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
  return {text: el.innerText, lines: tops.size};
});
"""


@pytest.mark.parametrize("width", [800, 1366])
def test_the_confusion_counts_stay_on_one_line(
    browser: Any, demo_run: Path, tmp_path: Path, width: int, shots: Callable[[Any, str], Path]
) -> None:
    # Two runs with the counts of a run a thousand times the demo's (a 12,000-problem run
    # counts "tn 287,000"): "tp · fp · fn · tn" is read as one line, never with a count torn
    # from its name.
    import shutil

    other = tmp_path / "second" / "run"
    shutil.copytree(demo_run, other)
    data = build_page_data([demo_run, other])
    for model in data.index["models"]:
        for row in model["rows"].values():
            for name in ("tp", "fp", "fn", "tn"):
                row[name] *= 1000
    page = tmp_path / "large-counts.html"
    write_page(page, data, title="large counts")
    _open(browser, page)
    browser.set_window_size(width, 768)
    browser.find_element("id", "more-rows").click()
    _wait(browser, lambda d: _css(d, "#models.show-more"))
    lines = browser.execute_script(READ_COUNT_LINES)
    assert len(lines) == sum(len(m["rows"]) for m in data.index["models"])
    assert all(line["lines"] == 1 for line in lines), [x for x in lines if x["lines"] != 1]
    browser.execute_script("document.querySelector('#models tr.prf-row').scrollIntoView()")
    shots(browser, f"confusion-counts-{width}")


def _tab_state(browser: Any) -> dict[str, Any]:
    state: dict[str, Any] = browser.execute_script(
        "const tabs = [...document.querySelectorAll('#pair-dialog [role=tab]')];"
        "const panel = document.querySelector('#pair-dialog [role=tabpanel]');"
        "return {focused: tabs.indexOf(document.activeElement),"
        " selected: tabs.map((t) => t.getAttribute('aria-selected')),"
        " tabindex: tabs.map((t) => t.getAttribute('tabindex')),"
        " labelledBy: panel && panel.getAttribute('aria-labelledby'),"
        " tabIds: tabs.map((t) => t.id),"
        " shown: (document.querySelector('#pair-dialog .sxs') || {dataset: {}}).dataset.condition};"
    )
    return state


def test_the_probe_tabs_follow_the_arrow_keys(
    browser: Any, demo_page: Path, shots: Callable[[Any, str], Path]
) -> None:
    # The WAI-ARIA tabs pattern: the selected tab alone is in the Tab order (tabindex 0, the
    # others -1); Left/Right move to the previous/next tab (wrapping), Home/End to the first
    # and last, each showing its probe in the tab panel.
    from selenium.webdriver.common.keys import Keys

    _open(browser, demo_page)
    dialog = browser.find_element("id", "pair-dialog")
    pair = _css(browser, "article.audit button.pair")[0]
    pair.send_keys(Keys.ENTER)
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == pair.get_attribute("title"))
    tab = dialog.find_element("css selector", '[role=tab][aria-selected="true"]')
    browser.execute_script("arguments[0].focus()", tab)
    count = len(_tab_state(browser)["selected"])
    assert count >= 3

    def expect(k: int) -> None:
        state = _tab_state(browser)
        assert state["focused"] == k, state
        assert state["selected"] == ["true" if j == k else "false" for j in range(count)], state
        assert state["tabindex"] == ["0" if j == k else "-1" for j in range(count)], state
        assert state["labelledBy"] == state["tabIds"][k], state
        assert state["shown"] == PROBE_CONDITIONS[k], state

    start = _tab_state(browser)["focused"]
    expect(start)
    keys = [
        (Keys.ARROW_RIGHT, (start + 1) % count),
        (Keys.ARROW_LEFT, start),
        (Keys.END, count - 1),
        (Keys.ARROW_RIGHT, 0),  # from the last to the first
        (Keys.ARROW_LEFT, count - 1),  # and back
        (Keys.HOME, 0),
    ]
    for key, k in keys:
        browser.switch_to.active_element.send_keys(key)
        _wait(browser, lambda d, k=k: _tab_state(d)["focused"] == k)
        expect(k)
    shots(browser, "probe-tabs-by-keyboard")
    # Tab leaves the tab list: the other tabs are not in the Tab order.
    browser.switch_to.active_element.send_keys(Keys.TAB)
    assert _tab_state(browser)["focused"] == -1
    browser.find_element("id", "pair-close").click()


def _verdict_options(browser: Any) -> list[str]:
    options: list[str] = browser.execute_script(
        "return [...document.getElementById('f-verdict').options].map((o) => o.text);"
    )
    return options


def test_the_verdict_filter_offers_the_verdicts_the_evaluator_gave(
    browser: Any, demo_page: Path, demo_run: Path
) -> None:
    from selenium.webdriver.support.ui import Select

    certs = _certificates(demo_run)
    every = {(c["endpoint"], c["problem_id"]) for c in certs}
    order = ["GROUNDED", "INPUT-SENSITIVE", "INSENSITIVE", "CASCADE", "UNSTABLE", "UNPARSEABLE"]

    def given(field: str) -> list[str]:
        return [v for v in order if any(c[field] == v for c in certs)]

    labels = {
        "verdict": "A+A': consistent and local probes, surface control",
        "verdict_cascade": "A+A'+cascade: A+A' with the cascade filter",
        "verdict_local": "A': local probe (predicate renamed in that premise only), "
        "surface control",
    }
    _open(browser, demo_page)
    _select(browser, "f-size", "100")
    assert "CASCADE" not in given("verdict") and "CASCADE" in given("verdict_cascade")
    assert _verdict_options(browser) == ["any", *given("verdict")]
    # Under the cascade filter its CASCADE is offered, and picking it shows its audits.
    _select(browser, "f-evaluator", labels["verdict_cascade"])
    assert _verdict_options(browser) == ["any", *given("verdict_cascade")]
    _select(browser, "f-verdict", "CASCADE")
    cascade = {(c["endpoint"], c["problem_id"]) for c in certs if c["verdict_cascade"] == "CASCADE"}
    assert cascade and set(_shown_audits(browser)) == cascade
    assert set(_visible_verdicts(browser)) == {"CASCADE"}
    # Back to A+A', which never gives it: the filter falls back to any verdict, all audits shown.
    _select(browser, "f-evaluator", labels["verdict"])
    assert _verdict_options(browser) == ["any", *given("verdict")]
    assert Select(browser.find_element("id", "f-verdict")).first_selected_option.text == "any"
    assert set(_shown_audits(browser)) == every and not _css(browser, "#audits .empty")
    # A verdict both give stays chosen.
    _select(browser, "f-verdict", "GROUNDED")
    _select(browser, "f-evaluator", labels["verdict_local"])
    assert Select(browser.find_element("id", "f-verdict")).first_selected_option.text == "GROUNDED"
    grounded = {(c["endpoint"], c["problem_id"]) for c in certs if c["verdict_local"] == "GROUNDED"}
    assert set(_shown_audits(browser)) == grounded


# ---- A's blind spot, said as report.md says it ------------------------------------------------

A_LABEL = "A: consistent probe (predicate renamed in every premise), surface control"

READ_ROW_HEADS = """
const out = {};
for (const tr of document.querySelectorAll('#models tr[data-key]')) {
  const th = tr.querySelector('th');
  out[tr.dataset.key] = {
    title: th.firstChild.textContent, meaning: th.querySelector('.meaning').innerText,
  };
}
return out;
"""


def _of(num: int, den: int) -> str:
    return f"{num:,} of {den:,}"


def test_a_figure_of_as_blind_spot_sits_beside_the_same_under_a_and_ap(
    browser: Any, demo_page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    # The page marked "entity-introduction premises ignored" and "right answer, wrong
    # reasoning" † under A+A' too, where they carry no blind spot; under A it showed "50 of 50"
    # with nothing beside it; and A's RAWR and misrepresentations ("cites a premise it ignored
    # (A)", a bare 35) read as findings. report.md sets each beside the same under A+A' and
    # says at that line that the difference is A's blind spot.
    report = _report(demo_run)
    _open(browser, demo_page)
    heads = browser.execute_script(READ_ROW_HEADS)
    assert heads["ignored_entity"]["title"] == "entity-introduction premises ignored"
    assert heads["rawr"]["title"] == "right answer, wrong reasoning"
    assert "blind spot" not in heads["rawr"]["meaning"]
    table = _table(browser)
    assert not any("beside-rawr" in cell for cell in table["rawr"])
    for column, section in enumerate(report["models"].values()):
        both = section["headline"]["found"]["A+A'"]
        rawr = section["rawr"]
        cell = table["rawr_consistent"][column]
        assert cell["rawr"] == f"{rawr['rawr']:,}"
        assert cell["rawr-entity"] == f"{rawr['structural_only']:,}"
        assert cell["rawr-rule"] == f"{rawr['predicate']:,}"
        assert cell["beside-rawr"] == _of(both["rawr"], both["correct"])
        cell = table["misrepresentations"][column]
        insensitive = section["verdict_mix"]["A"]["INSENSITIVE"]
        assert cell["misrepresentations"] == f"{section['misrepresentations']:,}"
        assert cell["insensitive"] == f"{insensitive:,}"
        cited = section["rule_mix"]["A+A'"].get("R_MISREPRESENT_CITED", 0)
        assert cell["beside-misrepresentations"] == _of(
            cited, section["verdict_mix"]["A+A'"]["INSENSITIVE"]
        )
    for key in ("rawr_consistent", "misrepresentations"):
        assert heads[key]["title"].endswith("under A †"), heads[key]
        assert "the difference is A’s blind spot" in heads[key]["meaning"]
    _select(browser, "f-evaluator", A_LABEL)
    heads = browser.execute_script(READ_ROW_HEADS)
    table = _table(browser)
    for key in ("ignored_entity", "grounded", "rawr"):
        assert heads[key]["title"].endswith(" †"), heads[key]
        assert "the difference is A’s blind spot" in heads[key]["meaning"]
    for column, section in enumerate(report["models"].values()):
        a, both = section["headline"]["found"]["A"], section["headline"]["found"]["A+A'"]
        assert table["ignored_entity"][column]["ignored-entity"] == f"{a['ignored_entity']:,}"
        assert table["ignored_entity"][column]["beside-ignored-entity"] == _of(
            both["ignored_entity"], both["judged_entity"]
        )
        assert table["rawr"][column]["beside-rawr"] == _of(both["rawr"], both["correct"])
        assert table["grounded"][column]["beside-grounded"] == (
            f"{100 * both['grounded_share']:.1f}%"
        )
    shots(browser.find_element("id", "summary"), "summary-under-a")


def test_under_a_an_ignored_entity_premise_is_marked_as_its_blind_spot(
    browser: Any, demo_page: Path, demo_run: Path
) -> None:
    # Under A every entity-introduction gold premise is INSENSITIVE whatever the model did,
    # yet its cell carried the red "ignored" alarm and its card "right answer, wrong
    # reasoning", as a rule premise the model truly ignored does.
    certs = {c["id"]: c for c in _certificates(demo_run)}
    _open(browser, demo_page)
    _select(browser, "f-size", "100")
    _select(browser, "f-evaluator", A_LABEL)
    cells = browser.execute_script(
        "return [...document.querySelectorAll('article.audit button.pair')].map((b) => ({"
        "id: b.title, marks: [...b.querySelectorAll('.mark')].map((m) => m.textContent)}));"
    )
    seen = {"entity": 0, "rule": 0}
    for cell in cells:
        cert = certs[cell["id"]]
        gold = cert["gold"]
        if cert["excluded"] or not gold["direct_parent"]:
            continue
        if cert["verdict_consistent"] != "INSENSITIVE":
            continue
        if gold["entity_premise"]:
            assert cell["marks"] == ["blind spot †"], cell
            seen["entity"] += 1
        else:
            assert cell["marks"] == ["ignored"], cell
            seen["rule"] += 1
    assert seen["entity"] and seen["rule"]  # the shortcut reasoner ignores rule premises too
    report = _report(demo_run)
    for card in _css(browser, "article.audit"):
        model, problem = card.get_attribute("data-model"), card.get_attribute("data-problem")
        found = report["models"][model]["headline"]["found"]
        under_a = problem in found["A"]["rawr_problems"]
        under_both = problem in found["A+A'"]["rawr_problems"]
        badges = [b.text for b in _css(card, ".badge.rawr")]
        if under_a and not under_both:
            assert badges == ["right answer, wrong reasoning under A † only, not under A+A'"]
        else:
            assert badges == (["right answer, wrong reasoning"] if under_a else [])


def test_a_page_without_bootstrap_promises_no_interval(
    browser: Any, failed_run: Path, tmp_path: Path
) -> None:
    # failed_run is evaluated with --n-boot 0: the validity section and the legend said
    # "95% bootstrap intervals over problems" over figures that have none.
    page = _view([failed_run], tmp_path / "no-intervals.html")
    _open(browser, page)
    head = browser.find_element(
        "xpath", "//tr[contains(@class, 'section-head')][contains(., 'validity')]"
    ).text
    legend = browser.find_element("id", "summary-legend").text
    for text in (head, legend):
        assert "95%" not in text and "--n-boot 0" in text, text
    assert "lowers F1 though the audit is right" in head
    assert not _css(browser, '[data-value="grounded-ci"], [data-metric="f1-ci"]')
