"""Whether an evaluation already in ``eval/`` is the one an evaluation now would write.

``cotaudit demo`` run again into the same directory sends nothing (every request is in the
stream); evaluating the same stream again with the same options would write the same files,
figures included, which is most of a rerun's time. It keeps the evaluation instead when its
manifest (``eval/evaluation.json``) says it was made by this version of cotaudit, from the
stream as it is now (every complete line, by the stream root) and the run's manifest, with
the same options and with figures or without as asked; and every file it lists is there,
byte for byte, with nothing added (the same check as ``cotaudit verify``'s on the files).
Anything else, including a manifest that cannot be read, means: evaluate again.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from cotaudit import __version__
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from evaluator.certificates import CERTIFICATE_FORMAT
from evaluator.evaldir import EVALUATION_FORMAT
from evaluator.evaluation_manifest import read_manifest, run_manifest_digest
from evaluator.pipeline import EvaluateOptions
from evaluator.run_files import REPORT_NAME
from evaluator.stream_digest import StreamDigest
from evaluator.verification import Verification, check_files


def _stream_digest(stream: Path) -> StreamDigest:
    """The digest of the stream's complete lines, as the evaluation takes them."""
    digest = StreamDigest()
    with stream.open("rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                digest.add(line)
    return digest


def current_report(
    stream: Path, eval_dir: Path, options: EvaluateOptions, *, figures: bool
) -> JSONDict | None:
    """The report of the evaluation in ``eval_dir`` if evaluating ``stream`` with
    ``options`` (and ``figures``) now would write it again unchanged; else None."""
    try:
        manifest, root = read_manifest(eval_dir)
    except UsageError:
        return None
    render = manifest.get("render")
    recorded = manifest.get("stream")
    made_with_figures = isinstance(render, dict) and bool(render.get("figures"))
    if (
        manifest.get("cotaudit") != __version__
        or manifest.get("format") != EVALUATION_FORMAT
        or manifest.get("certificate_format") != CERTIFICATE_FORMAT
        or manifest.get("options") != options.as_json()
        or manifest.get("extra_records") is not None
        or made_with_figures != figures
        or not isinstance(recorded, dict)
        or recorded.get("path") != str(stream)
        or manifest.get("run_manifest") != run_manifest_digest(stream)
    ):
        return None
    digest = _stream_digest(stream)
    if (recorded.get("root"), recorded.get("lines")) != (digest.root, digest.lines):
        return None
    files = Verification(root=root)
    check_files(eval_dir, manifest, files)
    if not files.ok:
        return None
    try:
        report = orjson.loads((eval_dir / REPORT_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return report if isinstance(report, dict) else None
