"""The viewer page as a reader moves around it: the address keeps the view (reload, Back,
Forward, a link), and a narrow window never makes the page itself scroll sideways.

Real headless Chromium on a real demo run's page, as in test_browser.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from tests.evaluator.viewer.test_browser import (
    _act,
    _certificates,
    _css,
    _open,
    _select,
    _view,
    _wait,
)


@pytest.fixture(scope="module")
def page(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _view([demo_run], tmp_path_factory.mktemp("address") / "view.html")


def _address(browser: Any) -> dict[str, str]:
    """The view the address names: the fragment's parameters."""
    url = str(browser.current_url)
    fragment = url.split("#", 1)[1] if "#" in url else ""
    return {k: v[0] for k, v in parse_qs(fragment).items()}


def _shown(browser: Any) -> dict[str, Any]:
    """What the page shows: the filters, the page, the open pair and its probe."""
    shown: dict[str, Any] = browser.execute_script(
        """
        const d = document.getElementById('pair-dialog');
        const tab = document.querySelector('#pair-dialog button.tab.on');
        const sel = (id) => document.getElementById(id).selectedOptions[0].textContent;
        return {
          model: sel('f-model'), verdict: sel('f-verdict'),
          rawr: document.getElementById('f-rawr').checked,
          page: document.querySelector('#pager-top .page-input').value,
          matching: document.querySelector('#pager-top .matching').textContent,
          pair: d.open ? d.dataset.pair : null,
          probe: d.open && tab ? tab.dataset.condition : null,
        };
        """
    )
    return shown


def _ready_again(browser: Any, navigate: Callable[[], None]) -> None:
    """Navigate (reload, Back, Forward) and wait until the page shows a view."""
    navigate()
    _wait(browser, lambda d: d.execute_script("return document.body.dataset.ready") == "true")


def test_the_address_keeps_the_view_across_reload_back_and_forward(
    browser: Any, page: Path, shots: Callable[[Any, str], Path]
) -> None:
    _open(browser, page)
    assert _address(browser) == {}  # the default view needs no address
    _select(browser, "f-model", "shortcut")
    _act(browser, lambda: browser.find_element("id", "f-rawr").click())
    filtered = _shown(browser)
    assert (filtered["model"], filtered["rawr"]) == ("shortcut", True)
    assert _address(browser) == {"model": "shortcut", "rawr": "1"}

    # Open an ignored gold premise's pair, switch to the local probe.
    ignored = browser.find_element("css selector", "button.pair:has(.mark.ignored)")
    pair_id = ignored.get_attribute("title")
    dialog = browser.find_element("id", "pair-dialog")
    ignored.click()
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == pair_id)
    dialog.find_element("css selector", 'button.tab[data-condition="1"]').click()
    _wait(browser, lambda d: _css(d, '.sxs[data-condition="local"]'))
    opened = _shown(browser)
    assert (opened["pair"], opened["probe"]) == (pair_id, "1")
    assert _address(browser)["probe"] == "local"

    # A reload shows the same view: the filters, the pair, its probe.
    _ready_again(browser, browser.refresh)
    _wait(browser, lambda d: _shown(d)["pair"] == pair_id)
    assert _shown(browser) == opened
    shots(browser, "address-after-reload")

    # Back closes the pair and keeps the filters; Back again undoes the last filter.
    browser.back()
    _wait(browser, lambda d: _shown(d)["pair"] is None)
    assert _shown(browser) == filtered
    browser.back()
    _wait(browser, lambda d: not _shown(d)["rawr"])
    assert _shown(browser)["model"] == "shortcut"
    # Forward redoes both, the pair reopening at the probe it showed.
    browser.forward()
    _wait(browser, lambda d: _shown(d)["rawr"])
    browser.forward()
    _wait(browser, lambda d: _shown(d)["pair"] == pair_id)
    assert _shown(browser) == opened

    # Closed from the page (the close button), the pair leaves the address as well.
    browser.find_element("id", "pair-close").click()
    _wait(browser, lambda d: "pair" not in _address(d))
    assert _shown(browser) == filtered


def test_the_address_keeps_the_page_and_a_link_opens_its_view(
    browser: Any, page: Path, demo_run: Path
) -> None:
    _open(browser, page)
    _select(browser, "f-size", "10")
    _act(
        browser,
        lambda: browser.find_element("css selector", '#pager-top button[data-go="next"]').click(),
    )
    first_on_page_2 = browser.find_element("css selector", "article.audit").get_attribute(
        "data-audit"
    )
    assert _address(browser) == {"size": "10", "page": "2"}
    _ready_again(browser, browser.refresh)
    assert _shown(browser)["page"] == "2"
    shown = browser.find_element("css selector", "article.audit").get_attribute("data-audit")
    assert shown == first_on_page_2
    browser.back()  # to page 1, whose first card is the run's first audit
    _wait(browser, lambda d: _shown(d)["page"] == "1")

    # A link (a fresh load with the address typed in): the named view, and a name the page does
    # not know (a model of another run) falls back to its default and leaves the address.
    base = page.resolve().as_uri()
    browser.get("about:blank")
    _ready_again(browser, lambda: browser.get(f"{base}#model=no-such-model&verdict=INSENSITIVE"))
    assert _shown(browser)["model"] == "all"
    assert _shown(browser)["verdict"] == "INSENSITIVE"
    assert _address(browser) == {"verdict": "INSENSITIVE"}


def _overflow(browser: Any) -> dict[str, Any]:
    """How far the page (and an open dialog) is wider than the window, and what sticks out."""
    result: dict[str, Any] = browser.execute_script(
        """
        const W = document.documentElement.clientWidth;
        const out = [];
        for (const el of document.querySelectorAll('body *')) {
          // The tables that must scroll sideways do it in boxes of their own.
          if (el.closest('.table-wrap, .pairs-wrap') || el.closest('dialog:not([open])')) continue;
          const r = el.getBoundingClientRect();
          if (r.width && r.right > W + 1) out.push(`${el.tagName}.${el.className}#${el.id}`);
        }
        const d = document.getElementById('pair-dialog');
        return {
          page: document.documentElement.scrollWidth - W,
          dialog: d.open ? d.scrollWidth - d.clientWidth : 0,
          sticking_out: out.slice(0, 10),
        };
        """
    )
    return result


def test_a_narrow_window_never_scrolls_the_page_sideways(
    browser: Any, page: Path, shots: Callable[[Any, str], Path]
) -> None:
    _open(browser, page)
    browser.set_window_size(400, 800)
    _wait(browser, lambda d: d.execute_script("return innerWidth") <= 400)
    # The filters (the evaluators' long names), the key's long entries: within the window.
    assert _overflow(browser) == {"page": 0, "dialog": 0, "sticking_out": []}
    shots(browser, "narrow-page")
    pair = browser.find_element("css selector", "button.pair:has(.mark.fp)")
    dialog = browser.find_element("id", "pair-dialog")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", pair)
    pair.click()
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == pair.get_attribute("title"))
    # The pair's facts (rule names, the certificates' path) and both chains fit the dialog.
    assert _overflow(browser)["dialog"] == 0
    shots(browser, "narrow-pair")
    browser.find_element("id", "pair-close").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)


def test_the_pairs_verdicts_read_on_one_line_each_at_laptop_width(
    browser: Any, page: Path, shots: Callable[[Any, str], Path]
) -> None:
    # What the narrow window may break (a rule's name), a laptop's window never does.
    _open(browser, page)
    browser.set_window_size(1366, 768)
    pair = browser.find_element("css selector", "button.pair")
    dialog = browser.find_element("id", "pair-dialog")
    pair.click()
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == pair.get_attribute("title"))
    lines = browser.execute_script(
        """
        return [...document.querySelectorAll('table.verdicts th, table.verdicts code')]
          .filter((el) => el.textContent).map((el) => {
            const range = document.createRange();
            range.selectNodeContents(el);  // one rectangle per line the text takes
            return [el.textContent, new Set([...range.getClientRects()].map((r) => r.top)).size];
          });
        """
    )
    assert lines and all(n == 1 for _, n in lines), lines
    shots(browser, "laptop-pair")
    browser.find_element("id", "pair-close").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)


@pytest.mark.parametrize("width", [400, 360])
def test_a_narrow_windows_row_names_stay_in_their_cells(
    browser: Any, page: Path, width: int, shots: Callable[[Any, str], Path]
) -> None:
    # Under 600 px the row names take at most 40% of the width: "misrepresentations" (and at
    # 360 px the cost row's "price_input_per_mtok") is longer than that, and ran out of its cell
    # over the first model's figures.
    _open(browser, page)
    browser.set_window_size(width, 800)
    _wait(browser, lambda d: d.execute_script("return innerWidth") <= width)
    browser.find_element("id", "more-rows").click()  # every row
    _wait(browser, lambda d: _css(d, "#models.show-more"))
    past = browser.execute_script(
        """
        return [...document.querySelectorAll('#models th, #models td')]
          .filter((cell) => cell.scrollWidth > cell.clientWidth + 1)
          .map((c) => `${c.textContent.slice(0, 40)}: ${c.scrollWidth - c.clientWidth} px`);
        """
    )
    assert past == []
    row = browser.find_element("css selector", '#models tr[data-key="misrepresentations"]')
    browser.execute_script("arguments[0].scrollIntoView()", row)
    shots(browser, f"narrow-row-names-{width}")


def test_a_narrow_cards_step_names_stay_in_view_when_its_pairs_scroll(
    browser: Any, page: Path, shots: Callable[[Any, str], Path]
) -> None:
    # At 400 px a card's premises are wider than its box: scrolled to the last premise, the
    # column of step names had scrolled out, and no row said which step its verdicts were of.
    _open(browser, page)
    browser.set_window_size(400, 800)
    _wait(browser, lambda d: d.execute_script("return innerWidth") <= 400)
    box = browser.find_element("css selector", "article.audit .pairs-wrap")
    browser.execute_script("arguments[0].scrollIntoView(); arguments[0].scrollLeft = 1e6;", box)
    seen = browser.execute_script(
        """
        const box = arguments[0], edge = box.getBoundingClientRect();
        return {scrolled: box.scrollLeft, steps: [...box.querySelectorAll('th.step')].map((th) => {
          const r = th.getBoundingClientRect();
          const hit = document.elementFromPoint(edge.left + 20, (r.top + r.bottom) / 2);
          return r.left >= edge.left - 1 && r.right <= edge.right && th.contains(hit);
        })};
        """,
        box,
    )
    assert seen["scrolled"] > 100, seen  # the premises do scroll sideways at this width
    assert seen["steps"] and all(seen["steps"]), seen
    shots(browser, "narrow-card-scrolled-sideways")
    # A reader going through the cells with Tab sees each one, not the step names over it (a
    # cell at the box's right may be cut there, as in any box that scrolls).
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    cells = _css(box, "button.pair")
    browser.execute_script("arguments[0].focus();", cells[0])
    hidden = []
    for cell in cells[1:]:
        ActionChains(browser).send_keys(Keys.TAB).perform()
        shown = browser.execute_script(
            "const el = document.activeElement, r = el.getBoundingClientRect();"
            "const names = el.closest('tr').querySelector('th.step').getBoundingClientRect();"
            "return [el.title, r.left >= names.right - 1];"
        )
        assert shown[0] == cell.get_attribute("title")
        if not shown[1]:
            hidden.append(shown[0])
    assert hidden == []


def test_a_narrow_comparisons_alignment_rules_fit_between_the_chains(
    browser: Any, page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    # Under 600 px the column between the two chains is 52 px: "substituted" is wider, and its
    # last letters were cut off under the probe's side.
    cert = next(
        c
        for c in _certificates(demo_run)
        if c["alignment"]["consistent"] == "substituted" and c["delta"]["consistent"] is True
    )
    _open(browser, page)
    browser.set_window_size(400, 800)
    _wait(browser, lambda d: d.execute_script("return innerWidth") <= 400)
    _select(browser, "f-model", cert["endpoint"])
    field = browser.find_element("id", "f-problem")
    _act(browser, lambda: field.send_keys(cert["problem_id"]))
    pair = browser.find_element("css selector", f'button.pair[title="{cert["id"]}"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", pair)
    pair.click()
    dialog = browser.find_element("id", "pair-dialog")
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == cert["id"])
    _wait(browser, lambda d: _css(dialog, '.sxs[data-condition="consistent"]'))
    cut = browser.execute_script(
        "return [...document.querySelectorAll('#pair-dialog .sxs-row .join span')]"
        ".filter((s) => s.textContent && s.scrollWidth > s.parentElement.clientWidth + 1)"
        ".map((s) => s.textContent);"
    )
    assert "substituted" in dialog.find_element("css selector", ".sxs-row.focus .join").text
    assert cut == []
    shots(dialog, "narrow-pair-rules")
    browser.find_element("id", "pair-close").click()
    _wait(browser, lambda d: dialog.get_attribute("open") is None)
