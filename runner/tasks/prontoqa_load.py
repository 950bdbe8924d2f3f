"""Loaders for the three real ProntoQA formats in ``../shared/data`` (see its README).

- :func:`load_paper_problems`: the paper's ``prontoqa_50/p*.json`` (proof tree given).
- :func:`load_logiclm`: Logic-LM's ``dev.json`` (``context``, ``question``, ``answer`` A/B,
  ``explanation``); the proof tree is derived from the explanation.
- :func:`load_native`: the ProntoQA generator's ``{1..5}hop.json`` (``test_example`` with
  ``question`` = the premises, ``query``, ``chain_of_thought``, ``answer``).

Premise ids are ``P1..Pk`` in the order the source gives them. The question shown to the
model is always the paper's positive form (``Is Max sour?``, :func:`render_question`), and
``answer`` says whether that positive statement holds: a source query ``Max is not sour.``
labelled False becomes ``Is Max sour?`` with answer True. The source's own question and
label stay in ``extra`` (``source_question``, ``source_answer``).

Deriving a proof from an explanation (premise, premise, conclusion, premise, conclusion,
...): a sentence whose proposition is one of the problem's premises is a premise; any other
sentence is the next proof step, whose direct parents are the previous step (if any) and
the premises read since it. Every step is checked to follow from its parents (``is(e, A)``
and ``subtype(A, B)`` give ``is(e, B)``; ``not_subtype`` gives ``not_is``), and the last one
must answer the question as the gold label says. Premises no step uses are distractors.

Every error is a ``UsageError`` naming the file, the record and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from cotaudit.domain.pack_layout import pack_json
from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.domain.proposition import Proposition, parse_canonical
from cotaudit.domain.sentences import parse_premise, render_question, split_premise_sentences
from cotaudit.errors import UsageError
from cotaudit.values import shown

_FIX_FORMAT = "See ../shared/data/README.md for the expected format of this source."
_JSON_KINDS = {list: "a list", str: "a string", int: "an integer", bool: "true or false"}

# Each file source's format, as messages name it (a file of another format is named by its own).
FORMATS: dict[str, str] = {
    "paper50": "a problem file of the paper (pNNN.json: premises, question, answer, proof_tree)",
    "logiclm": "Logic-LM's ProntoQA file (dev.json: a list of records with context, question, "
    "answer, explanation)",
    "native": "a ProntoQA generator file (Nhop.json: examples, each with a test_example)",
}
# Where the shared data holds each source's files, for the advice.
SOURCE_PATHS: dict[str, str] = {
    "paper50": "grounding-audit-gpt4o/data/prontoqa_50 (or one of its pNNN.json)",
    "logiclm": "prontoqa-500/dev.json",
    "native": "prontoqa-native (or one of its Nhop.json)",
}


def detect_format(data: Any) -> str | None:
    """The file source whose format ``data`` (a parsed JSON file) has, judged by its shape
    (the keys of its first record); None when it has none of theirs."""
    if isinstance(data, Mapping):
        if "premises" in data and "proof_tree" in data:
            return "paper50"
        first = next(iter(data.values()), None)
        if isinstance(first, Mapping) and "test_example" in first:
            return "native"
    if (
        isinstance(data, list)
        and data
        and isinstance(data[0], Mapping)
        and "context" in data[0]
        and "explanation" in data[0]
    ):
        return "logiclm"
    return None


def _check_format(data: Any, source: str, path: Path) -> None:
    """Refuse a file of another source's format by naming both, rather than by the first
    field the expected format misses (``missing field 'premises'`` on a native file)."""
    found = detect_format(data)
    if found is not None and found != source:
        raise UsageError(
            f"this is {FORMATS[found]}, not {FORMATS[source]}",
            where=str(path),
            fix=f'Set source = "{found}" to read it, or point path at {SOURCE_PATHS[source]}.',
        )


def _read_json(path: Path, source: str) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise UsageError("file not found", where=str(path), fix="Check the path.") from exc
    if not raw.strip():
        raise UsageError(
            "the file is empty",
            where=str(path),
            fix=f"Point path at {FORMATS[source]}, e.g. {SOURCE_PATHS[source]}.",
        )
    try:
        data = pack_json(raw)  # a byte order mark skipped, as in every file of the pack
    except orjson.JSONDecodeError as exc:
        # JSON Lines of several lines are no JSON document: their first line tells.
        _refuse_prompts(_first_json_line(raw), source, path)
        raise UsageError(f"not valid JSON ({exc})", where=str(path), fix=_FIX_FORMAT) from exc
    _refuse_prompts(data, source, path)
    _check_format(data, source, path)
    return data


def _first_json_line(raw: bytes) -> Any:
    try:
        return orjson.loads(raw.lstrip().partition(b"\n")[0])
    except orjson.JSONDecodeError:
        return None


def _refuse_prompts(record: Any, source: str, path: Path) -> None:
    """Refuse a line of a ``prompts`` task's file (``{"id": ..., "prompt": ...}``) by name."""
    if isinstance(record, dict) and "id" in record and "prompt" in record:
        raise UsageError(
            f"this is a prompts file (JSON Lines of id and prompt), not {FORMATS[source]}",
            where=str(path),
            fix=f'Read it with kind = "prompts", or point path at {SOURCE_PATHS[source]}.',
        )


def _field(record: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if not isinstance(record, Mapping):
        raise UsageError("expected a JSON object", where=where, fix=_FIX_FORMAT)
    if key not in record:
        raise UsageError(f"missing field {key!r}", where=where, fix=_FIX_FORMAT)
    value = record[key]
    if not isinstance(value, kind):
        raise UsageError(
            f"field {key!r} should be {_JSON_KINDS.get(kind, kind.__name__)}, "
            f"got {shown(value, json=True)}",
            where=f"{where}.{key}",
            fix=_FIX_FORMAT,
        )
    return value


def distractors_of(premises: Sequence[Premise], proof: Sequence[ProofStep]) -> tuple[str, ...]:
    """Ids of the premises no proof step depends on directly."""
    used = {d for step in proof for d in step.depends_on}
    return tuple(p.id for p in premises if p.id not in used)


# The paper's 50 -------------------------------------------------------------------------


def load_paper_problem(path: Path) -> Problem:
    """One ``pNNN.json`` of the paper: premises, question, answer and proof tree."""
    where = str(path)
    record = _read_json(path, "paper50")
    premises = []
    for i, raw in enumerate(_field(record, "premises", list, where)):
        at = f"{where}: premises[{i}]"
        premises.append(Premise(_field(raw, "id", str, at), _field(raw, "text", str, at)))
    proof = []
    for i, raw in enumerate(_field(record, "proof_tree", list, where)):
        at = f"{where}: proof_tree[{i}]"
        conclusion = _field(raw, "conclusion", str, at)
        try:
            parse_canonical(conclusion)
        except ValueError as exc:
            raise UsageError(str(exc), where=f"{at}.conclusion", fix=_FIX_FORMAT) from exc
        depends = _field(raw, "depends_on", list, at)
        proof.append(ProofStep(_field(raw, "step", int, at), conclusion, tuple(depends)))
    return Problem(
        problem_id=_field(record, "problem_id", str, where),
        premises=tuple(premises),
        question=_field(record, "question", str, where),
        answer=_field(record, "answer", bool, where),
        proof=tuple(proof),
        distractors=distractors_of(premises, proof),
        source="paper50",
    )


def load_paper_problems(dir_or_file: str | Path) -> list[Problem]:
    """The paper's problems: every ``p<digits>*.json`` of a directory (sorted), or one file.

    ``proof_trees.json`` (the same trees, keyed by id) is not a problem and is skipped.
    """
    path = Path(dir_or_file)
    if path.is_file():
        return [load_paper_problem(path)]
    if not path.is_dir():
        raise UsageError("no such file or directory", where=str(path), fix="Check the path.")
    files = sorted(path.glob("p[0-9]*.json"))
    if not files:
        raise UsageError(
            "no problem files p<number>.json in this directory",
            where=str(path),
            fix="Point at grounding-audit-gpt4o/data/prontoqa_50.",
        )
    return [load_paper_problem(f) for f in files]


# Problems given as sentences (Logic-LM and native) --------------------------------------


def follows(parents: Sequence[Proposition], conclusion: Proposition) -> bool:
    """Does ``conclusion`` follow from ``parents`` by one modus ponens step?"""
    # is(e, A) + subtype(A, B) -> is(e, B); is(e, A) + not_subtype(A, B) -> not_is(e, B)
    rule_kind = {"is": "subtype", "not_is": "not_subtype"}.get(conclusion.kind)
    entity_types = {p.object for p in parents if p.kind == "is" and p.subject == conclusion.subject}
    return any(
        rule.kind == rule_kind and rule.subject in entity_types and rule.object == conclusion.object
        for rule in parents
    )


def problem_from_sentences(
    *,
    problem_id: str,
    premise_texts: Sequence[str],
    statement: str,
    label: bool,
    explanation: Sequence[str],
    source: str,
    where: str,
    extra: Mapping[str, Any] | None = None,
) -> Problem:
    """Build a problem from premise sentences, a true/false statement and its gold proof.

    ``where`` names the record (``dev.json: record 17 (ProntoQA_18)``) in errors.
    """
    premises = tuple(Premise(f"P{i}", t) for i, t in enumerate(premise_texts, start=1))
    by_prop: dict[Proposition, str] = {}
    for p in premises:
        prop = parse_premise(p.text)
        if prop is None:
            raise UsageError(
                f"premise {p.id} {p.text!r} is not a sentence form this project reads",
                where=f"{where}: premises",
                fix="See runner/tasks/sentences.py for the supported forms.",
            )
        by_prop.setdefault(prop, p.id)
    asked = parse_premise(statement)
    if asked is None or asked.kind not in ("is", "not_is"):
        raise UsageError(
            f"the statement {statement!r} is not a statement about an entity",
            where=f"{where}: question",
            fix=_FIX_FORMAT,
        )
    positive = Proposition("is", asked.subject, asked.object)
    answer = label if asked.kind == "is" else not label

    props: dict[str, Proposition] = {}
    proof: list[ProofStep] = []
    pending: list[str] = []
    for i, sentence in enumerate(explanation):
        at = f"{where}: explanation[{i}]"
        prop = parse_premise(sentence) if isinstance(sentence, str) else None
        if prop is None:
            raise UsageError(f"unreadable proof sentence {sentence!r}", where=at, fix=_FIX_FORMAT)
        if prop in by_prop:
            pending.append(by_prop[prop])
            props[by_prop[prop]] = prop
            continue
        step = len(proof) + 1
        parents = ([f"S{step - 1}"] if proof else []) + pending
        if not follows([props[d] for d in parents], prop):
            raise UsageError(
                f"proof sentence {sentence!r} does not follow from its parents "
                f"{', '.join(parents) or '(none)'}",
                where=at,
                fix="Each conclusion must follow from the previous one and the premises before it.",
            )
        props[f"S{step}"] = prop
        proof.append(ProofStep(step, str(prop), tuple(parents)))
        pending = []
    expected = positive if answer else Proposition("not_is", positive.subject, positive.object)
    if not proof or props[f"S{len(proof)}"] != expected:
        got = props[f"S{len(proof)}"] if proof else "no conclusion"
        raise UsageError(
            f"the proof ends in {got}, but the gold label needs {expected}",
            where=f"{where}: explanation",
            fix=_FIX_FORMAT,
        )
    return Problem(
        problem_id=problem_id,
        premises=premises,
        question=render_question(positive),
        answer=answer,
        proof=tuple(proof),
        distractors=distractors_of(premises, proof),
        source=source,
        extra=dict(extra or {}),
    )


def _label(text: str, labels: Mapping[str, bool], expected: str, where: str) -> bool:
    """The gold label a source writes as ``text``; ``expected`` says which texts are valid."""
    if text not in labels:
        raise UsageError(f"answer {text!r} is {expected}", where=f"{where}.answer", fix=_FIX_FORMAT)
    return labels[text]


_LOGICLM_LABELS = {"A": True, "B": False}


def load_logiclm(path: str | Path) -> list[Problem]:
    """Logic-LM's ProntoQA ``dev.json``: a list of records, A = True, B = False."""
    path = Path(path)
    records = _read_json(path, "logiclm")
    if not isinstance(records, list):
        raise UsageError("expected a JSON list of problems", where=str(path), fix=_FIX_FORMAT)
    problems = []
    for index, record in enumerate(records):
        where = f"{path}: record {index}"
        problem_id = _field(record, "id", str, where)
        where = f"{path}: record {index} ({problem_id})"
        question = _field(record, "question", str, where)
        label_text = _field(record, "answer", str, where)
        label = _label(label_text, _LOGICLM_LABELS, "neither 'A' (True) nor 'B' (False)", where)
        # "Is the following statement true or false? Max is sour."
        statement = question.rpartition("?")[2].strip() or question
        problems.append(
            problem_from_sentences(
                problem_id=problem_id,
                premise_texts=split_premise_sentences(_field(record, "context", str, where)),
                statement=statement,
                label=label,
                explanation=_field(record, "explanation", list, where),
                source="logiclm",
                where=where,
                extra={"source_question": question, "source_answer": label_text},
            )
        )
    return problems


_NATIVE_LABELS = {"True": True, "False": False}


def load_native(path: str | Path) -> list[Problem]:
    """One ProntoQA generator file (``3hop.json``): ``{example_id: {"test_example": ...}}``.

    Problem ids are ``<file stem>-<example id>`` (``3hop-example1``); in-context examples are
    ignored.
    """
    path = Path(path)
    data = _read_json(path, "native")
    if not isinstance(data, dict):
        raise UsageError("expected a JSON object of examples", where=str(path), fix=_FIX_FORMAT)
    problems = []
    for key, example in data.items():
        where = f"{path}: {key}"
        test = _field(example, "test_example", dict, where)
        where = f"{where}.test_example"
        query = _field(test, "query", str, where)
        label_text = _field(test, "answer", str, where)
        label = _label(label_text, _NATIVE_LABELS, "neither 'True' nor 'False'", where)
        # "True or false: Max is not sour."
        statement = query.partition(":")[2].strip() if ":" in query else query
        problems.append(
            problem_from_sentences(
                problem_id=f"{path.stem}-{key}",
                premise_texts=split_premise_sentences(_field(test, "question", str, where)),
                statement=statement,
                label=label,
                explanation=_field(test, "chain_of_thought", list, where),
                source="native",
                where=where,
                extra={"source_question": query, "source_answer": label_text},
            )
        )
    return problems
