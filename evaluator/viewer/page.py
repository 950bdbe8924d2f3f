"""The page: the viewer's HTML, CSS and JavaScript with the data packed inside, one file.

The data travels as gzip-compressed JSON in base64, one ``<script
type="application/octet-stream">`` element for the index and one per chunk; the page
decompresses them with the browser's ``DecompressionStream`` (no library, no request). A
Content-Security-Policy meta tag allows exactly the page's own script and style (by hash) and
nothing else, so the page can make no network request even if a text it shows were to contain
markup.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from cotaudit.output_file import replacing
from evaluator.viewer.data import PageData, iter_encoded

ASSETS = resources.files("evaluator.viewer") / "assets"
INDEX_ELEMENT = "d-index"  # the index's element id; chunk k is f"d-{k}"


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _data_element(element_id: str, payload: bytes) -> str:
    encoded = base64.b64encode(payload).decode("ascii")
    return f'<script type="application/octet-stream" id="{element_id}">{encoded}</script>\n'


def page_parts(data: PageData, *, title: str) -> Iterable[str]:
    """The page's text, in pieces (the data elements can be large)."""
    style = _asset("viewer.css")
    script = _asset("viewer.js")
    csp = (
        "default-src 'none'; "
        f"script-src {_csp_hash(script)}; "
        f"style-src {_csp_hash(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    head, _, tail = _asset("page.html").partition("{{DATA}}")
    head = (
        head.replace("{{TITLE}}", html.escape(title))
        .replace("{{CSP}}", html.escape(csp, quote=True))
        .replace("{{STYLE}}", style)
    )
    yield head
    for k, payload in enumerate(iter_encoded(data)):
        yield _data_element(INDEX_ELEMENT if k == 0 else f"d-{k - 1}", payload)
    yield tail.replace("{{SCRIPT}}", script)


def write_page(path: Path, data: PageData, *, title: str) -> int:
    """Write the page atomically (a reader never sees half a file, a failure leaves the
    previous page whole); return its size in bytes. ``path``'s directory must exist."""
    size = 0
    with replacing(path) as handle:
        for part in page_parts(data, title=title):
            encoded = part.encode("utf-8")
            handle.write(encoded)
            size += len(encoded)
    return size
