"""The cards' order ("order" in the filters): a reader finds a model's worst problems first.

Real headless Chromium on a real demo run's page, as in test_browser.py. The expected orders
are computed here from the run's files (report.json, certificates.jsonl), never from the page's
data: the default order (problem id, numbers as numbers, then the report's model order) and
the counts each order ranks by, most first, ties in the default order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from evaluator.viewer.data import EVALUATORS
from tests.evaluator.viewer.test_browser import (
    _act,
    _open,
    _report,
    _select,
    _view,
    _wait,
)
from tests.evaluator.viewer.test_browser_address import _address, _ready_again
from tests.evaluator.viewer.test_data import _counts_from_certificates

COMBINED = [e.key for e in EVALUATORS].index("combined")
CONSISTENT = [e.key for e in EVALUATORS].index("consistent")
BOTH_LABEL = "A+A': consistent and local probes, surface control"
IGNORED = "most ignored gold premises first"
FPS = "most false positives first"

Audit = tuple[str, str]  # (model, problem), as the cards' data-model and data-problem


@pytest.fixture(scope="module")
def page(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _view([demo_run], tmp_path_factory.mktemp("sort") / "view.html")


def _natural(problem: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", problem))


def _default_order(run: Path) -> list[Audit]:
    """Every audit (a model with an original answer to a problem) by problem id, then model."""
    models = list(_report(run)["models"])
    audits = set()
    for line in (run / "results.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["kind"] == "response" and record["condition"] == "original":
            audits.add((record["endpoint"], record["problem_id"]))
    return sorted(audits, key=lambda a: (_natural(a[1]), models.index(a[0])))


def _ranked(run: Path, count: Callable[[dict[str, list[int]]], int]) -> list[tuple[Audit, int]]:
    """The default order sorted by ``count`` of each audit's certificates, most first (a stable
    sort: ties keep the default order)."""
    counts = _counts_from_certificates(run)
    zero = {k: [0] * len(EVALUATORS) for k in ("ignored_rule", "ignored_entity", "fp")}
    keyed = [(a, count(counts.get(a, zero))) for a in _default_order(run)]
    return sorted(keyed, key=lambda t: -t[1])


def _cards(browser: Any) -> list[tuple[Audit, int | None, str]]:
    """The cards shown: (model, problem), the rank's value and text (None, "" without one)."""
    shown = browser.execute_script(
        "return [...document.querySelectorAll('article.audit')].map((a) => {"
        "  const r = a.querySelector('.rank');"
        "  return [a.dataset.model, a.dataset.problem, r ? Number(r.dataset.rank) : null,"
        "          r ? r.textContent : ''];"
        "});"
    )
    return [((m, p), rank, text) for m, p, rank, text in shown]


def _sort_label(browser: Any) -> str:
    label: str = browser.execute_script(
        "return document.getElementById('f-sort').selectedOptions[0].textContent"
    )
    return label


def _next_option(browser: Any, element_id: str) -> None:
    """Choose the option after the chosen one with the Down key, as a reader does. A key is a
    user's gesture, and selenium's choice of an option (``_select``) is none: Chromium's Back
    skips a history entry whose page pushed the next one without a gesture."""
    from selenium.webdriver.common.keys import Keys

    control = browser.find_element("id", element_id)
    browser.execute_script("arguments[0].focus()", control)
    _act(browser, lambda: control.send_keys(Keys.ARROW_DOWN))


def test_the_default_view_is_unchanged(browser: Any, page: Path, demo_run: Path) -> None:
    _open(browser, page)
    assert _address(browser) == {}  # no fragment
    assert _sort_label(browser) == "problem id"
    cards = _cards(browser)
    assert [a for a, _, _ in cards] == _default_order(demo_run)[:20]
    assert all(rank is None for _, rank, _ in cards)  # no rank on a card in the default order
    assert [b.text for b in browser.find_elements("css selector", ".badge.fp")]  # as before


def test_the_order_ranks_the_worst_first_and_stays_in_the_address(
    browser: Any, page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    report = _report(demo_run)["models"]
    blind = any(m["headline"]["found"]["A"]["blind_spot"] for m in report.values())
    assert blind and not any(m["headline"]["found"]["A+A'"]["blind_spot"] for m in report.values())
    _open(browser, page)
    _select(browser, "f-size", "100")  # every audit of the demo on one page
    _next_option(browser, "f-sort")
    assert _sort_label(browser) == IGNORED

    # Under A+A' every ignored gold premise use counts, rule or entity-introduction.
    both = _ranked(demo_run, lambda c: c["ignored_rule"][COMBINED] + c["ignored_entity"][COMBINED])
    assert both[0][1] > 0 and both[-1][1] == 0  # the shortcut reasoner's cards come first
    sorted_both = [(a, rank) for a, rank, _ in _cards(browser)]
    assert sorted_both == both
    assert _address(browser) == {"size": "100", "sort": "ignored"}
    first_text = _cards(browser)[0][2]
    assert re.fullmatch(r"\d+ ignored gold premise uses?", first_text), first_text
    shots(browser, "sort-ignored")

    # Under A, an entity-introduction premise INSENSITIVE is its blind spot: not ranked, and
    # the card says how many it left out.
    _next_option(browser, "f-evaluator")
    assert browser.find_element("id", "f-evaluator").get_attribute("value") == str(CONSISTENT)
    under_a = _ranked(demo_run, lambda c: c["ignored_rule"][CONSISTENT])
    cards = _cards(browser)
    assert [(a, rank) for a, rank, _ in cards] == under_a
    counts = _counts_from_certificates(demo_run)
    for audit, _, text in cards:
        entity = counts[audit]["ignored_entity"][CONSISTENT] if audit in counts else 0
        assert ("blind spot †, not ranked" in text) == bool(entity), (audit, text)
    assert any("blind spot" in text for _, _, text in cards)

    # By false positives (under A), the count replaces the card's "false positive" badge.
    _next_option(browser, "f-sort")
    assert _sort_label(browser) == FPS
    fps = _ranked(demo_run, lambda c: c["fp"][CONSISTENT])
    assert len({n for _, n in fps}) > 2  # counts that differ, not only ties
    assert [(a, rank) for a, rank, _ in _cards(browser)] == fps
    assert not browser.find_elements("css selector", ".badge.fp")
    assert _address(browser) == {"evaluator": "consistent", "size": "100", "sort": "fp"}
    browser.set_window_size(1366, 768)
    browser.execute_script("document.querySelector('article.audit').scrollIntoView()")
    shots(browser, "sort-fp-laptop")

    # Back and Forward step through the orders as through the other controls.
    browser.back()
    _wait(browser, lambda d: _sort_label(d) == IGNORED)
    assert [(a, rank) for a, rank, _ in _cards(browser)] == under_a
    browser.back()  # the evaluator back to A+A'
    _wait(browser, lambda d: "evaluator" not in _address(d))
    assert [(a, rank) for a, rank, _ in _cards(browser)] == sorted_both
    browser.back()  # the order back to the default: no rank on a card
    _wait(browser, lambda d: _sort_label(d) == "problem id")
    assert _address(browser) == {"size": "100"}
    cards = _cards(browser)
    assert [a for a, _, _ in cards] == _default_order(demo_run)
    assert all(rank is None for _, rank, _ in cards)
    browser.forward()
    _wait(browser, lambda d: _sort_label(d) == IGNORED)
    assert [(a, rank) for a, rank, _ in _cards(browser)] == sorted_both

    # A reload shows the same order.
    _ready_again(browser, browser.refresh)
    assert _sort_label(browser) == IGNORED
    assert [(a, rank) for a, rank, _ in _cards(browser)] == sorted_both


def test_a_link_names_the_order_and_an_unknown_one_falls_back(
    browser: Any, page: Path, demo_run: Path
) -> None:
    base = page.resolve().as_uri()
    browser.get("about:blank")
    _ready_again(browser, lambda: browser.get(f"{base}#sort=fp&size=100"))
    assert _sort_label(browser) == FPS
    fps = _ranked(demo_run, lambda c: c["fp"][COMBINED])
    assert [(a, rank) for a, rank, _ in _cards(browser)] == fps
    browser.get("about:blank")
    _ready_again(browser, lambda: browser.get(f"{base}#sort=nonsense"))
    assert _sort_label(browser) == "problem id"
    assert _address(browser) == {}
    assert [a for a, _, _ in _cards(browser)] == _default_order(demo_run)[:20]


def test_the_order_is_chosen_from_the_keyboard(browser: Any, page: Path, demo_run: Path) -> None:
    _open(browser, page)
    control = browser.find_element("id", "f-sort")
    _next_option(browser, "f-sort")
    assert _sort_label(browser) == IGNORED
    assert _address(browser) == {"sort": "ignored"}
    assert browser.switch_to.active_element == control  # the focus stays on the control
    both = _ranked(demo_run, lambda c: c["ignored_rule"][COMBINED] + c["ignored_entity"][COMBINED])
    assert [(a, rank) for a, rank, _ in _cards(browser)] == both[:20]
