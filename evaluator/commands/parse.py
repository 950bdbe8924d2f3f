"""``cotaudit parse [FILE|-] [--vocabulary WORDS]``: how the parser reads each line.

One sentence or step per input line (a ``Step k:`` header is dropped; blank lines are
skipped), one JSON object per output line, in the same order::

    {"text": "So Fae is a galtus.", "reading": "assertion", "propositions": ["is(fae, galtus)"],
     "assumed": false, "category": null}

``reading`` is ``assertion`` (``propositions``: the step's conclusion first, then what its
other clauses state), ``not_a_step`` (a comment, hypothetical, goal, question, answer,
``unknown_word``...: ``category`` says which) or ``unparseable``. ``--vocabulary`` gives the
problem's words (comma separated: ``feline,carnivore,prime number,7``): names of several
words are read as one, plurals resolve to them, and a conclusion naming any other word is
``not_a_step`` (``unknown_word``). For users debugging why a step was not read, and for
anyone checking the parser (docs/parsing.md).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict
from evaluator.canon import read_step
from evaluator.canon.step import StepReading
from evaluator.canon.vocabulary import Vocabulary, vocabulary_from_words

HELP = "Show how the parser reads each line of a file (or stdin): one JSON object per line."
_HEADER = re.compile(r"^\s*(?:[*#>_\-\s]*)step\s*\d+\s*[*_]*\s*[:.)–—]?\s*[*_]*\s*", re.I)
READINGS = {"assertion": "assertion", "non_assertion": "not_a_step", "unparseable": "unparseable"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE|-",
        help="input, one step per line (default: -, standard input)",
    )
    parser.add_argument(
        "--vocabulary",
        metavar="WORDS",
        help="the problem's words, comma separated (e.g. 'feline,carnivore,prime number,7')",
    )


def reading_record(text: str, reading: StepReading) -> JSONDict:
    """The output object of one line."""
    props = [] if reading.prop is None else [str(reading.prop)]
    for clause in reading.clauses:
        if clause.prop is not None and str(clause.prop) not in props:
            props.append(str(clause.prop))
    if reading.status != "assertion":
        props = []
    return {
        "text": text,
        "reading": READINGS[reading.status],
        "propositions": props,
        "assumed": reading.assumed,
        "category": reading.category,
    }


def parse_lines(lines: Iterable[str], vocabulary: Vocabulary | None = None) -> Iterator[JSONDict]:
    """Read each non-blank line as one step (its ``Step k:`` header dropped)."""
    for line in lines:
        text = line.strip()
        if not text:
            continue
        body = _HEADER.sub("", text, count=1)
        yield reading_record(text, read_step(body, vocabulary=vocabulary))


def _open(name: str) -> BinaryIO:
    if name == "-":
        # Bytes, decoded line by line below: the text layer of stdin would turn bytes that are
        # not UTF-8 into surrogates (under the C/POSIX locale) that the JSON writer refuses.
        return sys.stdin.buffer
    path = Path(name)
    if not path.is_file():
        raise UsageError(
            "a directory, not a file" if path.is_dir() else "no such file",
            where=name,
            fix="Give a text file with one step per line, or '-'.",
        )
    try:
        return path.open("rb")
    except OSError as exc:
        raise UsageError(
            f"cannot read it: {exc.strerror}", where=name, fix="Check the path."
        ) from exc


def decoded_lines(handle: Iterable[bytes], where: str) -> Iterator[str]:
    """Each line of ``handle`` as UTF-8 text (a byte-order mark before the first removed, as
    editors on Windows write one); ``UsageError`` naming the first line that is not UTF-8."""
    number = 0
    for chunk in handle:
        # bytes.splitlines splits at \n, \r\n and \r, as reading in text mode did.
        for raw in chunk.splitlines():
            number += 1
            try:
                yield (raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UsageError(
                    f"line {number}: not UTF-8 text ({exc.reason})",
                    where=where,
                    fix="Save the file as UTF-8 text (a binary file has no steps to read).",
                ) from exc


def run(args: argparse.Namespace) -> int:
    vocabulary = None
    if args.vocabulary is not None:
        words = [w for w in args.vocabulary.split(",") if w.strip()]
        if not words:
            raise UsageError(
                "no words",
                where="--vocabulary",
                fix="Give the problem's words, comma separated: --vocabulary 'fae,galtus'.",
            )
        vocabulary = vocabulary_from_words(words)
    handle = _open(args.file)
    where = "standard input" if args.file == "-" else args.file
    try:
        out = sys.stdout.buffer
        for record in parse_lines(decoded_lines(handle, where), vocabulary):
            out.write(orjson.dumps(record) + b"\n")
        out.flush()
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    return 0
