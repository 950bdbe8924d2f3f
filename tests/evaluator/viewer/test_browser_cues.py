"""The viewer for a reader who does not see its colours (a colour-blind reader, a greyscale
print): every state a colour shows is also said in words or drawn as a shape; and the models
table's head stays in view however the page is scrolled.

Real headless Chromium on a real demo run's page, as in test_browser.py; the expected states
come from certificates.jsonl, not from the page's data.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.evaluator.viewer.test_browser import (
    A_LABEL,
    _act,
    _certificates,
    _css,
    _open,
    _select,
    _two_runs_page,
    _view,
    _wait,
)

DEPENDENT = ("GROUNDED", "INPUT-SENSITIVE")


@pytest.fixture(scope="module")
def page(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _view([demo_run], tmp_path_factory.mktemp("cues") / "view.html")


READ_PAIRS = """
return [...document.querySelectorAll('article.audit button.pair')].map((b) => {
  const style = getComputedStyle(b);
  return {id: b.title, label: b.getAttribute('aria-label') || '', classes: [...b.classList],
          border: `${style.borderTopStyle} ${style.borderTopWidth}`,
          marks: [...b.querySelectorAll('.mark, .star')].map((m) => m.textContent)};
});
"""


def test_each_state_of_a_pair_is_said_in_words_and_drawn_as_a_shape(
    browser: Any, page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    certs = {c["id"]: c for c in _certificates(demo_run)}
    _open(browser, page)
    _select(browser, "f-size", "100")
    pairs = browser.execute_script(READ_PAIRS)
    assert len(pairs) > 100
    seen = set()
    for pair in pairs:
        cert = certs[pair["id"]]
        gold, excluded = cert["gold"]["direct_parent"], bool(cert["excluded"])
        verdict = cert["verdict"]  # the page's default evaluator: A+A', without A's blind spot
        fp = not gold and not excluded and verdict in DEPENDENT
        ignored = gold and not excluded and verdict == "INSENSITIVE"
        expected = not gold and not excluded and verdict in ("INSENSITIVE", "CASCADE")
        said = pair["label"].split("; ")
        # Its accessible name: where it is, its verdict, then each state the cell shows.
        step, premise = cert["cot_step"], cert["premise_id"]
        assert said[0].startswith(f"step {step} × {premise}: {verdict}"), pair
        assert said[-1] == f"seal {cert['sha256'][:8]}", pair
        states = set(said[1:-1])
        assert ("gold premise" in states) == gold, pair
        assert ("false positive" in states) == fp, pair
        assert ("ignored" in states) == ignored, pair
        assert ("excluded from the metrics" in states) == excluded, pair
        assert ("as expected" in states) == expected, pair
        # On the screen, each state is a shape or a word as well as a colour: a gold premise a
        # solid border and a star, a false positive a dashed border and "FP", an ignored one
        # "ignored"; the expected cell none of them (it is muted: lighter, in grey as well).
        if gold:
            assert pair["border"] == "solid 2px" and "★" in pair["marks"], pair
        if fp:
            assert pair["border"] == "dashed 2px" and "FP" in pair["marks"], pair
        if ignored:
            assert "ignored" in pair["marks"], pair
        if expected:
            assert pair["border"] == "solid 1px" and not pair["marks"], pair
        seen |= {name for name, on in (("gold", gold), ("fp", fp), ("ignored", ignored)) if on}
        seen |= {"expected"} if expected else set()
    assert seen == {"gold", "fp", "ignored", "expected"}
    card = next(
        a
        for a in _css(browser, "article.audit")
        if a.get_attribute("data-model") == "shortcut" and _css(a, ".pair .mark.ignored")
    )
    _greyscale(shots(card, "cues-card"))


def _greyscale(path: Path) -> Path:
    """The screenshot as a greyscale print shows it, saved beside it."""
    from PIL import Image

    grey = path.with_name(f"{path.stem}-grey.png")
    Image.open(path).convert("L").save(grey)
    return grey


def _pair_with_changed_rows(demo_run: Path) -> tuple[dict[str, Any], str, set[int]]:
    """A certificate, a probe under which its step changed, and the other steps of its chain
    whose conclusion changed under the same probe for the same premise (at least one)."""
    certs = _certificates(demo_run)
    by_premise: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in certs:
        by_premise.setdefault((c["endpoint"], c["problem_id"], c["premise_id"]), []).append(c)
    for c in certs:
        for condition, changed in c["delta"].items():
            if changed is not True:
                continue
            same = by_premise[(c["endpoint"], c["problem_id"], c["premise_id"])]
            others = {o["cot_step"] for o in same if o["delta"][condition] is True}
            others.discard(c["cot_step"])
            if others:
                return c, condition, others
    raise AssertionError("the demo run has no pair with another changed step")


READ_ROWS = """
return [...document.querySelectorAll('#pair-dialog .sxs-row[data-step]')]
  .filter((row) => row.dataset.step !== '')
  .map((row) => {
    const side = row.querySelector('.side.orig');
    const state = row.querySelector('.row-state');
    return {step: Number(row.dataset.step), classes: [...row.classList],
            current: row.getAttribute('aria-current'), state: state ? state.textContent : null,
            bar: getComputedStyle(side).boxShadow, outline: getComputedStyle(row).outlineStyle};
  });
"""


def test_the_comparison_says_which_rows_changed_and_which_is_the_pairs(
    browser: Any, page: Path, demo_run: Path, shots: Callable[[Any, str], Path]
) -> None:
    # The rows whose conclusion changed were told from the others by a pale tint alone, which a
    # greyscale print shows as white; the pair's own row by its frame and a blue wash.
    cert, condition, changed = _pair_with_changed_rows(demo_run)
    _open(browser, page)
    _select(browser, "f-model", cert["endpoint"])
    field = browser.find_element("id", "f-problem")
    _act(browser, lambda: field.send_keys(cert["problem_id"]))
    (article,) = _css(browser, "article.audit")
    article.find_element("css selector", f'button.pair[title="{cert["id"]}"]').click()
    dialog = browser.find_element("id", "pair-dialog")
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == cert["id"])
    tab = next(t for t in _css(dialog, "button.tab") if t.text.startswith(f"{condition} probe"))
    tab.click()
    _wait(browser, lambda d: _css(dialog, f'.sxs[data-condition="{condition}"]'))
    rows = browser.execute_script(READ_ROWS)
    assert {r["step"] for r in rows} >= changed | {cert["cot_step"]}
    for row in rows:
        if row["step"] == cert["cot_step"]:
            assert row["state"] == "this pair’s step" and row["current"] == "step", row
            assert row["outline"] == "solid", row  # framed
        elif row["step"] in changed:
            assert "changed" in row["classes"], row
            assert row["state"] == "changed" and row["current"] is None, row
            assert "inset" in row["bar"], row  # a bar at its left
        else:
            assert row["state"] is None and row["bar"] == "none", row
    # The current evaluator's verdict is underlined and marked current.
    current = _css(dialog, "table.verdicts tr.current")
    assert len(current) == 1 and current[0].get_attribute("aria-current") == "true"
    # In greyscale, a changed row's left edge still differs from an unchanged row's.
    path = shots(dialog, "cues-comparison")
    _greyscale(path)
    from PIL import Image

    grey = Image.open(path).convert("L")
    edges = browser.execute_script(
        "const d = arguments[0].getBoundingClientRect();"
        "return [...arguments[0].querySelectorAll('.sxs-row[data-step] .side.orig')].map((s) => {"
        " const r = s.getBoundingClientRect(); const row = s.parentElement;"
        " return {step: Number(row.dataset.step), x: r.left - d.left + 1,"
        " y: (r.top + r.bottom) / 2 - d.top}; });",
        dialog,
    )
    level = {e["step"]: grey.getpixel((round(e["x"]), round(e["y"]))) for e in edges if e["step"]}
    unchanged = [v for step, v in level.items() if step not in changed and step != cert["cot_step"]]
    for step in changed:
        assert all(abs(level[step] - v) > 40 for v in unchanged), (level, changed)


def test_inserted_and_removed_words_are_underlined_and_struck_through(
    browser: Any, page: Path, demo_run: Path
) -> None:
    cert = next(
        c
        for c in _certificates(demo_run)
        if c["gold"]["direct_parent"] and c["delta"]["consistent"] is True and c["cot_step"] > 1
    )
    _open(browser, page)
    _select(browser, "f-model", cert["endpoint"])
    field = browser.find_element("id", "f-problem")
    _act(browser, lambda: field.send_keys(cert["problem_id"]))
    browser.find_element("css selector", f'button.pair[title="{cert["id"]}"]').click()
    dialog = browser.find_element("id", "pair-dialog")
    _wait(browser, lambda d: dialog.get_attribute("data-pair") == cert["id"])
    lines = browser.execute_script(
        "const read = (s) => [...document.querySelectorAll(s)]"
        ".map((m) => getComputedStyle(m).textDecorationLine);"
        "return {ins: read('#pair-dialog mark.ins'), del: read('#pair-dialog mark.del')};"
    )
    assert lines["ins"] and all("underline" in x for x in lines["ins"]), lines
    assert lines["del"] and all("line-through" in x for x in lines["del"]), lines


# Where the models table's head is against the window, and whether a person sees each model's
# name and the run row there (not a figure painted over them).
READ_HEAD = """
const thead = document.querySelector('#models thead');
const head = thead.getBoundingClientRect();
const box = document.getElementById('summary-table').getBoundingClientRect();
const seen = (el) => {
  const r = el.getBoundingClientRect();
  const x = (Math.max(r.left, box.left) + Math.min(r.right, box.right)) / 2;
  const hit = document.elementFromPoint(x, (r.top + r.bottom) / 2);
  return hit !== null && el.contains(hit);
};
const inView = (th) => {  // not under the corner cell, not past the box's right edge
  const r = th.getBoundingClientRect();
  return r.right > box.left + 260 && r.left < box.right - 20;
};
const cells = (selector) => [...thead.querySelectorAll(selector)].filter(inView).map(seen);
return {position: getComputedStyle(thead).position, headTop: head.top, boxTop: box.top,
        boxBottom: box.bottom, names: cells('th.model'),
        runs: cells('tr.run-row th[scope=colgroup]'),
        pageWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth};
"""


@pytest.mark.parametrize("width", [1400, 400])
def test_the_models_head_stays_at_the_window_top_when_the_page_scrolls(
    browser: Any, demo_run: Path, tmp_path: Path, width: int, shots: Callable[[Any, str], Path]
) -> None:
    # The head stuck to the top of the table's box, which is no higher than the window: once
    # the page itself scrolled the box's top out of the window, the run row and the model
    # names went with it, over rows still in view.
    page = _two_runs_page(demo_run, tmp_path)
    _open(browser, page)
    browser.set_window_size(width, 800)
    _wait(browser, lambda d: d.execute_script("return innerWidth") <= width)
    for down in (150, 400):
        browser.execute_script(
            "const w = document.getElementById('summary-table');"
            "window.scrollTo(0, w.getBoundingClientRect().top + window.scrollY + arguments[0]);",
            down,
        )
        head = _wait(browser, lambda d: _head_at_top(d.execute_script(READ_HEAD)))
        assert head["position"] == "sticky", head
        assert head["boxTop"] < -100 and head["boxBottom"] > head["headTop"] + 150, head
        assert head["names"] and all(head["names"]), head
        assert head["runs"] and all(head["runs"]), head
        assert head["pageWidth"] <= head["innerWidth"], head  # the page never scrolls sideways
    shots(browser, f"models-head-page-scrolled-{width}")
    # Scrolled back up, the head is at the top of its box again, under the section's title.
    browser.execute_script("window.scrollTo(0, 0)")
    head = _wait(
        browser,
        lambda d: (h := d.execute_script(READ_HEAD)) and abs(h["headTop"] - h["boxTop"]) <= 1 and h,
    )
    assert head["boxTop"] > 0, head


def _head_at_top(head: dict[str, Any]) -> dict[str, Any] | None:
    return head if abs(head["headTop"]) <= 1 else None


# Each pair cell's parts that reach outside the cell's own box: a mark drawn over the border
# and onto the next cell, a seal cut off.
READ_OVERFLOW = """
const out = [];
for (const cell of document.querySelectorAll('article.audit button.pair')) {
  const box = cell.getBoundingClientRect();
  for (const part of cell.querySelectorAll('.verdict, .rule, .seal, .mark, .star')) {
    const r = part.getBoundingClientRect();
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.bottom > box.bottom + 0.5) {
      out.push(`${cell.getAttribute('aria-label')}: ${part.className} past by ` +
               `${Math.max(box.left - r.left, r.right - box.right, r.bottom - box.bottom)} px`);
    }
  }
}
return out;
"""


@pytest.mark.parametrize("width", [1400, 400])
def test_a_cells_marks_stay_inside_the_cell(
    browser: Any, page: Path, demo_run: Path, width: int, shots: Callable[[Any, str], Path]
) -> None:
    # Under A, "blind spot †" beside the seal was 6 px wider than the 112 px cell: on every
    # entity-introduction premise A judged INSENSITIVE the mark ran over the cell's border, and
    # its dashed frame over the next cell's.
    certs = _certificates(demo_run)
    assert any(
        c["gold"]["entity_premise"] and c["verdict_consistent"] == "INSENSITIVE" for c in certs
    )
    _open(browser, page)
    browser.set_window_size(width, 1000)
    _select(browser, "f-size", "100")
    labels = browser.execute_script(
        "return [...document.querySelectorAll('#f-evaluator option')].map((o) => o.text);"
    )
    assert labels[0] != A_LABEL and A_LABEL in labels  # the page opens under A+A'
    for k, label in enumerate(labels):  # each one's marks: A's blind spot, FP and ignored
        if k:
            _select(browser, "f-evaluator", label)
        assert browser.execute_script(READ_OVERFLOW) == [], label
    _select(browser, "f-evaluator", A_LABEL)
    blind = [a for a in _css(browser, "article.audit") if _css(a, ".pair .mark.blind")]
    assert blind  # the case is on the page
    shots(blind[0], f"cues-blind-spot-mark-{width}")
