"""The record kinds of ``results.jsonl``, as types, and the one validator of their shape.

Each kind is a ``TypedDict``: the static type that the writer's producers and the evaluator's
readers share, and, read at run time, the field list that :func:`validate_record` checks.
``docs/schema.md`` documents exactly these fields (a test compares the two). Fields that a
later schema version adds are ``NotRequired``, so older streams stay valid; fields the types
do not name are allowed (a newer writer's additions), and ignored by the validator.

The validator checks shapes (a field's JSON type, a list's items, an object's fields), never
meaning: a proof conclusion that is not canonical or a premise id that a response names but
its problem lacks is the domain's business (``cotaudit.domain``), reported there.
"""

# No ``from __future__ import annotations`` here: the record types are read at run time, and
# with string annotations Python 3.11's TypedDict cannot see which keys are NotRequired.
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, Union

from cotaudit.errors import UsageError

# Version of the stream's records (docs/schema.md, "Versions"): 2 added optional fields only,
# so streams of version 1 read unchanged.
SCHEMA_VERSION = 2

JSONDict: TypeAlias = dict[str, Any]
Message: TypeAlias = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}

Condition: TypeAlias = Literal[
    "original",
    "consistent",
    "local",
    "surface",
    "sample",
    "intervened",
    "preserving",
    "prompt",
]
CONDITIONS: tuple[str, ...] = typing.get_args(Condition)
PROBE_CONDITIONS: tuple[str, ...] = ("consistent", "local", "surface")


class PremiseEntry(TypedDict):
    id: str
    text: str


class ProofStepEntry(TypedDict):
    step: int
    conclusion: str
    depends_on: list[str]


class ProntoQAProblemRecord(TypedDict):
    """A ``problem`` of the grounding audit (task ``prontoqa``)."""

    kind: Literal["problem"]
    schema: int
    task: Literal["prontoqa"]
    problem_id: str
    premises: list[PremiseEntry]
    question: str
    answer: bool
    proof: list[ProofStepEntry]
    hops: int
    distractors: list[str]
    source: str
    extra: dict[str, Any]


class VariantEntry(TypedDict):
    prompt: str
    answer: int | bool


class ProceduralProblemRecord(TypedDict):
    """A ``problem`` of the selection study (task ``procedural``)."""

    kind: Literal["problem"]
    schema: int
    task: Literal["procedural"]
    family: str
    problem_id: str
    stratum: int
    original: VariantEntry
    intervened: VariantEntry
    preserving: VariantEntry
    spec: dict[str, Any]


class PromptProblemRecord(TypedDict):
    """A ``problem`` of a prompts file (task ``prompts``)."""

    kind: Literal["problem"]
    schema: int
    task: Literal["prompts"]
    problem_id: str
    prompt: str
    system: str | None
    temperature: float
    samples: int


class MessageEntry(TypedDict):
    role: str
    content: str


class ModelEntry(TypedDict):
    provider: str
    model: str
    host: str


class RequestRecord(TypedDict):
    """A planned request (``cotaudit plan``), and the request half of a ``response``."""

    kind: Literal["request"]
    schema: int
    request_id: str
    cache_key: str
    endpoint: str
    task: str
    problem_id: str
    condition: Condition
    target_premise: str | None
    sample_index: int
    probe: dict[str, Any] | None
    messages: list[MessageEntry]
    params: dict[str, Any]
    model: ModelEntry


class ErrorEntry(TypedDict):
    type: str
    status: int | None
    message: str
    body: str | None
    attempts: int
    maybe_sent: NotRequired[bool]  # failures without an answer: may it have reached the server?


class ResponseRecord(TypedDict):
    """One request and its outcome."""

    kind: Literal["response"]
    schema: int
    request_id: str
    cache_key: str
    endpoint: str
    task: str
    problem_id: str
    condition: Condition
    target_premise: str | None
    sample_index: int
    probe: dict[str, Any] | None
    messages: list[MessageEntry]
    params: dict[str, Any]
    model: ModelEntry
    text: str | None
    finish_reason: str | None
    usage: dict[str, Any] | None
    latency_s: float | None  # null where not measured (records imported from a pack)
    attempts: int
    attempt_outcomes: list[str]
    cached: bool
    queued_at: NotRequired[str]  # absent before 0.2
    admitted_at: NotRequired[str]  # absent before 0.2
    started_at: str
    finished_at: str
    error: ErrorEntry | None
    # Optional since 0.2: what the server said it served, and a reasoning model's trace.
    served_model: NotRequired[str | None]
    system_fingerprint: NotRequired[str | None]
    reasoning: NotRequired[str | None]
    reasoning_tokens: NotRequired[int | None]
    reasoning_withheld: NotRequired[bool]  # true only: the server withheld the trace's text
    via: NotRequired[Literal["online", "batch"]]


class TruthStepEntry(TypedDict):
    step: int
    kind: str
    conclusion: str | None
    used: list[str]
    depends_on: list[str]


class TruthRecord(TypedDict):
    """Which premises each step of a simulated reasoner's original chain truly used."""

    kind: Literal["truth"]
    schema: int
    endpoint: NotRequired[str]  # the endpoint it was written for; absent before 0.2
    problem_id: str
    model: str
    # Which text of a reasoning model the steps are of; absent: "answer" (every reasoner).
    trace: NotRequired[Literal["answer", "reasoning"]]
    answer: bool
    steps: list[TruthStepEntry]


class SampleStepEntry(TypedDict):
    cot_step: int
    majority_conclusion: str | None
    agreement: float
    n_valid: int
    n_unique: int
    consistent: bool


class SampleSummaryRecord(TypedDict):
    """Per-step summaries of a problem's self-consistency samples (imported packs only)."""

    kind: Literal["sample_summary"]
    schema: int
    endpoint: str
    problem_id: str
    model: ModelEntry
    n_samples: int
    temperature: float
    steps: list[SampleStepEntry]
    source_sha256: str


PROBLEM_RECORD_TYPES: Mapping[str, type] = {
    "prontoqa": ProntoQAProblemRecord,
    "procedural": ProceduralProblemRecord,
    "prompts": PromptProblemRecord,
}
RECORD_TYPES: Mapping[str, type] = {
    "request": RequestRecord,
    "response": ResponseRecord,
    "truth": TruthRecord,
    "sample_summary": SampleSummaryRecord,
}
KINDS: tuple[str, ...] = ("problem", *RECORD_TYPES)


def record_type(record: Mapping[str, Any]) -> type | None:
    """The ``TypedDict`` that describes ``record`` (None for a kind or task we do not know)."""
    kind = record.get("kind")
    if kind == "problem":
        return PROBLEM_RECORD_TYPES.get(str(record.get("task")))
    return RECORD_TYPES.get(str(kind))


def validate_record(record: Any, *, where: str) -> None:
    """Raise ``UsageError`` naming ``where`` and the field when ``record`` breaks its shape.

    ``where`` says which record this is (``results.jsonl:12``, ``record of request r1``).
    Records of a newer schema than this build reads, and of a kind it does not know, are
    refused with what to do; a problem of an unknown task is accepted as it is (tasks are
    extensible and the evaluator skips what it does not audit).
    """
    if not isinstance(record, dict):
        raise _shape_error(where, "the record", "a JSON object", record)
    kind = record.get("kind")
    if kind != "problem" and kind not in RECORD_TYPES:
        raise UsageError(
            f"unknown record kind {kind!r}",
            where=where,
            fix=f"A record's 'kind' is one of {', '.join(KINDS)}; see docs/schema.md.",
        )
    schema = record.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise _shape_error(where, "'schema'", "a positive integer", schema)
    if schema > SCHEMA_VERSION:
        raise UsageError(
            f"record of schema {schema}, newer than this cotaudit reads ({SCHEMA_VERSION})",
            where=where,
            fix="Upgrade cotaudit to read this stream.",
        )
    typed = record_type(record)
    if typed is not None and not _conforms(typed)(record):
        # The compiled check only says yes or no; the walk below finds the field and says why.
        _check_fields(record, typed, where, prefix="")


Predicate: TypeAlias = Callable[[Any], bool]
# A JSON array: a list as read, or a tuple a producer hands the writer (orjson writes both).
_ARRAYS = (list, tuple)


@cache
def _conforms(typed: type) -> Predicate:
    """A yes/no check of a record type, compiled once: the evaluator reads millions of records,
    and walking the annotations for each one would cost more than parsing its JSON."""
    return _compile(typed)


def _compile(hint: Any) -> Predicate:
    if hint is Any:
        return lambda value: True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [option for option in typing.get_args(hint) if option is not type(None)]
        nullable = len(options) < len(typing.get_args(hint))
        checks = [_compile(option) for option in options]
        if len(checks) == 1:
            (only,) = checks
            return (lambda value: value is None or only(value)) if nullable else only
        return lambda value: (nullable and value is None) or any(c(value) for c in checks)
    if origin is Literal:
        allowed = frozenset(typing.get_args(hint))
        return lambda value: isinstance(value, str) and value in allowed
    if origin is list:
        (item,) = typing.get_args(hint)
        each = _compile(item)
        return lambda value: isinstance(value, _ARRAYS) and all(each(v) for v in value)
    if origin is dict:
        return lambda value: isinstance(value, dict)
    if typing.is_typeddict(hint):
        required, hints = _fields(hint)
        fields = tuple((name, name in required, *_field_test(h)) for name, h in hints.items())
        missing = object()

        def check_fields(value: Any) -> bool:
            if not isinstance(value, dict):
                return False
            get = value.get
            for name, needed, classes, exact_types, check in fields:
                field = get(name, missing)
                if field is missing:
                    if needed:
                        return False
                elif classes is not None:
                    if not isinstance(field, classes):
                        return False
                elif exact_types is not None:
                    if type(field) not in exact_types:
                        return False
                elif not check(field):
                    return False
            return True

        return check_fields
    if hint is int:
        return lambda value: type(value) is int  # bool is a subclass of int, not an integer here
    if hint is float:
        return lambda value: type(value) is float or type(value) is int
    return lambda value: isinstance(value, hint)


# The fields of a record are mostly strings, integers and objects, some nullable: tested in
# line (``isinstance``, or the exact types for numbers, where bool is not an integer) rather
# than through a predicate call each, which would cost the evaluator more than the test does.
FieldTest: TypeAlias = tuple[type | tuple[type, ...] | None, frozenset[type] | None, Predicate]
_EXACT_NUMBERS: dict[Any, frozenset[type]] = {int: frozenset({int}), float: frozenset({int, float})}


def _field_test(hint: Any) -> FieldTest:
    """How a record's field is tested: ``(classes, None, _)`` means ``isinstance(v, classes)``,
    ``(None, exact_types, _)`` means ``type(v) in exact_types``, else the predicate."""
    if hint is Any:
        return object, None, _compile(hint)
    options = [hint]
    if typing.get_origin(hint) in (Union, types.UnionType):
        options = list(typing.get_args(hint))
    plain = [o if typing.get_origin(o) is not dict else dict for o in options]
    if all(isinstance(o, type) and not typing.is_typeddict(o) for o in plain):
        if any(o in _EXACT_NUMBERS for o in plain):
            exact: set[type] = set()
            for o in plain:
                if o in _EXACT_NUMBERS:
                    exact |= _EXACT_NUMBERS[o]
                elif o in (bool, type(None)):  # classes without subclasses: exact is isinstance
                    exact.add(o)
                else:
                    return None, None, _compile(hint)
            return None, frozenset(exact), _compile(hint)
        return (plain[0] if len(plain) == 1 else tuple(plain)), None, _compile(hint)
    return None, None, _compile(hint)


def _check_fields(value: Mapping[str, Any], typed: type, where: str, *, prefix: str) -> None:
    required, hints = _fields(typed)
    for name, hint in hints.items():
        if name not in value:
            if name in required:
                raise UsageError(
                    f"missing field '{prefix}{name}'",
                    where=where,
                    fix="See docs/schema.md for the fields of each record kind.",
                )
            continue
        _check(value[name], hint, where, f"{prefix}{name}")


def _check(value: Any, hint: Any, where: str, path: str) -> None:
    if hint is Any:
        return
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return
        failures = []
        for option in options:
            if option is type(None):
                continue
            try:
                _check(value, option, where, path)
                return
            except UsageError as exc:
                failures.append(exc)
        # One container option left (``X | None`` with X an object or a list): its error names
        # the field deep inside, which says more than "must be an object or null".
        containers = [o for o in options if typing.is_typeddict(o) or typing.get_origin(o)]
        if len(failures) == 1 and containers and isinstance(value, (dict, *_ARRAYS)):
            raise failures[0]
        raise _shape_error(where, f"'{path}'", _describe(hint), value)
    if origin is Literal:
        if value not in typing.get_args(hint):
            raise _shape_error(where, f"'{path}'", _describe(hint), value)
        return
    if origin is list:
        if not isinstance(value, _ARRAYS):
            raise _shape_error(where, f"'{path}'", _describe(hint), value)
        (item,) = typing.get_args(hint)
        for i, element in enumerate(value):
            _check(element, item, where, f"{path}[{i}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise _shape_error(where, f"'{path}'", "an object", value)
        return
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            raise _shape_error(where, f"'{path}'", "an object", value)
        _check_fields(value, hint, where, prefix=f"{path}.")
        return
    if not _is_instance(value, hint):
        raise _shape_error(where, f"'{path}'", _describe(hint), value)


def _is_instance(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # JSON has one number type: 1 is a valid float field
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint)


@cache
def _fields(typed: type) -> tuple[frozenset[str], dict[str, Any]]:
    # TypedDict's own record of which keys are required (NotRequired ones are not).
    required: frozenset[str] = typed.__required_keys__  # type: ignore[attr-defined]
    return required, typing.get_type_hints(typed)


def field_names(typed: type) -> tuple[str, ...]:
    """The fields of a record type, in declaration order (what docs/schema.md lists)."""
    return tuple(_fields(typed)[1])


_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(hint))
    if origin is Literal:
        return " or ".join(repr(v) for v in typing.get_args(hint))
    if origin is list:
        return "a list"
    if origin is dict or typing.is_typeddict(hint):
        return "an object"
    if hint is type(None):
        return "null"
    return _JSON_NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, _ARRAYS):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _shape_error(where: str, what: str, expected: str, value: Any) -> UsageError:
    return UsageError(
        f"{what} must be {expected}, not {_json_type(value)}",
        where=where,
        fix="The stream was edited or written by another tool; see docs/schema.md.",
    )
