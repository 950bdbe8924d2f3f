"""A run's files -> the viewer page's data. The ONLY module that knows their field names.

Read: ``eval/report.json`` (docs/report-schema.md), ``eval/certificates.jsonl``
(docs/certificates.md), ``results.jsonl`` (docs/schema.md: problem and response records) and
``manifest.json`` (prices). Everything the page shows is mapped here to the page's own names
(the ``PAGE_*`` constants and the keys built below, read by ``assets/viewer.js``), so a change
of the report's or the certificates' shape is a change in this module alone.

The page's data is an *index* (runs, the models' summary tables, one row of filter facts and
sort counts per audit) and *chunks* of ``CHUNK_AUDITS`` audits each (problem, raw texts,
pairs). An audit is one model on one problem. The page decodes the index at load and a chunk
only when one of its audits is shown, so opening a 10,000-problem run costs the index, not
every text.

What the audit found about each model (the premise uses its steps ignored, the grounded share,
right answer wrong reasoning, false positives, per evaluator) is the report's ``headline``
(docs/report-schema.md), read as it is: the page computes no figure of its own. The
certificates give what is per pair: each cell's verdict, rule and seal, and the marks (a gold
premise judged INSENSITIVE, a dependent verdict on a premise that is not gold), and those marks
counted per audit, which the cards' order ranks by.
"""

from __future__ import annotations

import gzip
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from cotaudit import __version__
from cotaudit.constants import BATCH_DISCOUNT
from cotaudit.errors import UsageError
from cotaudit.schema import (
    PROBE_CONDITIONS,
    JSONDict,
    numbered_records,
)
from evaluator.canon import extract_true_false_answer, output_steps
from evaluator.certificates import read_certificates
from evaluator.jobs import section_name
from evaluator.report import short_of_plan_note
from evaluator.run_files import (
    RunFiles,
    headline_of,
    locate_run,
    model_sections,
    read_json,
    run_labels,
)
from evaluator.stage_records import TRACES, Trace
from evaluator.verdicts import R_MISREPRESENT_CITED, Verdict

PAGE_FORMAT = 2  # version of the page's data layout (the index and chunk keys below); 2: pairs
# carry their step's position and their counterparts' ("index", "probe_index")
CHUNK_AUDITS = 64  # audits per compressed chunk: a page of 20 touches one to a few chunks
# Hex digits of each certificate's seal kept in the page. A whole seal is 64 hex digits of
# entropy that gzip cannot shrink (43 of ~56 compressed bytes per pair, measured on the demo);
# 16 digits (64 bits) still name a certificate uniquely, and the page gives its line in
# certificates.jsonl, where the whole seal is (docs/viewer.md).
SEAL_DIGITS = 16

ORIGINAL = "original"
CONDITIONS_SHOWN = (ORIGINAL, *PROBE_CONDITIONS)  # the texts a pair is computed from


@dataclass(frozen=True, slots=True)
class Evaluator:
    """One evaluator whose verdicts the page can show, and where its fields live."""

    key: str  # the page's name
    label: str
    meaning: str
    verdict_field: str  # in a certificate
    rule_field: str | None  # in a certificate (None: the certificate records no rule)
    report_row: str  # the report row scoring it against the full gold
    report_name: str  # its name in report.json's headline ("A+A'", ...)


# The first is the page's default: the combined evaluator, whose local probe covers
# entity-introduction premises that consistent substitution cannot see.
EVALUATORS: tuple[Evaluator, ...] = (
    Evaluator(
        "combined",
        "A+A'",
        "consistent and local probes, surface control",
        "verdict",
        "decision_rule",
        "A_Ap_combined_full",
        "A+A'",
    ),
    Evaluator(
        "consistent",
        "A",
        "consistent probe (predicate renamed in every premise), surface control",
        "verdict_consistent",
        "decision_rule_consistent",
        "A_consistent_full",
        "A",
    ),
    Evaluator(
        "local",
        "A'",
        "local probe (predicate renamed in that premise only), surface control",
        "verdict_local",
        None,
        "A_local_full",
        "A'",
    ),
    Evaluator(
        "cascade",
        "A+A'+cascade",
        "A+A' with the cascade filter",
        "verdict_cascade",
        "decision_rule_cascade",
        "A_Ap_cascade_full",
        "A+A'+cascade",
    ),
)

# Display order of the verdicts; a verdict the evaluator adds later is appended as found.
KNOWN_VERDICTS: tuple[str, ...] = (
    Verdict.GROUNDED.value,
    Verdict.INPUT_SENSITIVE.value,
    Verdict.INSENSITIVE.value,
    Verdict.CASCADE.value,
    Verdict.UNSTABLE.value,
    Verdict.UNPARSEABLE.value,
)
SKIPPED_VERDICTS = frozenset({Verdict.UNSTABLE.value, Verdict.UNPARSEABLE.value})
IGNORED_VERDICT = Verdict.INSENSITIVE.value

# (report row, label, what it scores, carries the consistent probe's entity blind spot,
# shown before "more rows")
VALIDITY_ROWS: tuple[tuple[str, str, str, bool, bool], ...] = (
    ("A_Ap_cascade_full", "A+A'+cascade", "A+A' with the cascade filter", False, True),
    ("A_Ap_combined_full", "A+A'", "consistent and local probes combined", False, True),
    ("A_consistent_full", "A", "consistent probe only", True, True),
    ("A_Ap_cascade_truth", "A+A'+cascade vs truth", "scored against the truth", False, True),
    ("A_consistent_truth", "A vs truth", "A scored against what the reasoner used", True, True),
    ("A_consistent_pred", "A, pred gold", "A, entity premises counted as negatives", False, False),
    ("A_local_full", "A'", "local probe only", False, False),
    ("self_consistency_full", "self-consistency", "baseline: sampled chains agree", False, False),
    ("string_diff_full", "string diff", "baseline: the step's text changed", False, False),
)

# Pair columns, in order; the page reads them by these names.
PAIR_COLUMNS: tuple[str, ...] = (
    "id",
    "step",  # the CoT step number as written in the original output
    # Its 1-based position there (``cot_index``; None in a certificate older than it): a
    # restarted chain writes "Step 1" twice, so the page finds steps by position, not number.
    "index",
    "premise",
    "proof_step",  # aligned gold proof step, None when unmatched
    "flags",  # PAIR_FLAGS bits
    "verdicts",  # per evaluator: index into the index's "verdicts"
    "rules",  # per evaluator: decision rule or None
    "seal",  # the first SEAL_DIGITS hex digits of the certificate's sha256
    "line",  # the certificate's line in certificates.jsonl
    "phi",  # per condition of CONDITIONS_SHOWN: canonical conclusion or None
    "delta",  # per probe condition: changed / unchanged / None (unread or missing)
    "align",  # per condition of CONDITIONS_SHOWN: how the step was aligned
    "probe_steps",  # per probe condition: the counterpart's step number or None
    "probe_index",  # per probe condition: the counterpart's 1-based position or None
    "status",  # parser status of the original step, with the non-assertion category
    "evidence",  # the citation's evidence ("" when the step does not cite the premise)
    "excluded",  # reasons the pair is out of the metrics
    "fp_cause",  # the report's cause of a false positive of A, or None
)
PAIR_FLAGS: dict[str, int] = {
    "evaluable": 1,
    "gold": 2,  # the premise is a direct parent of the aligned proof step
    "entity": 4,  # the premise introduces the entity ("Alex is a bempus")
    "cites": 8,
    "misrepresentation": 16,
}
FP_SHIFT = 5  # bit FP_SHIFT + e: a false positive under evaluator e
IGNORED_SHIFT = FP_SHIFT + len(EVALUATORS)  # bit IGNORED_SHIFT + e: an ignored gold use


@dataclass(frozen=True, slots=True)
class PageData:
    """The page's data: the index (a JSON value) and the chunks, each gzip-compressed JSON."""

    index: JSONDict
    chunks: list[bytes]

    def chunk(self, k: int) -> JSONDict:
        """Chunk ``k`` decoded (for tests and other readers of the data)."""
        value: JSONDict = orjson.loads(gzip.decompress(self.chunks[k]))
        return value


# ---- the stream --------------------------------------------------------------------------


class _Texts:
    """Every distinct raw text once (global ids); texts repeat across probes and models (an
    answer and a reasoning trace are split into steps alike: ``_text_entry``)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.values: list[str] = []

    def add(self, text: str) -> int:
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = len(self.values)
            self.values.append(text)
        return found

    def add_own(self, text: str) -> int:
        """``text`` under an id of its own: a failed request's text carries its error, which
        must not attach to every response that returned the same (often empty) text."""
        self.values.append(text)
        return len(self.values) - 1


@dataclass(frozen=True, slots=True)
class _Response:
    endpoint: str
    problem_id: str
    condition: str
    premise: str | None
    sample: int
    text: int  # id in _Texts
    reasoning: int | None  # id in _Texts of the reasoning trace, where the model returned one
    error: str | None

    def trace_text(self, trace: Trace) -> int | None:
        return self.text if trace == "answer" else self.reasoning


class _RequestUsage(NamedTuple):
    endpoint: str
    input_tokens: int
    output_tokens: int
    batch: bool  # sent through a batch API (``via: "batch"``): billed at the batch discount


@dataclass(frozen=True, slots=True)
class _Usage:
    """An endpoint's tokens over its requests, and those of them sent by batch."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    batch_requests: int = 0
    batch_input_tokens: int = 0
    batch_output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class _Prices:
    input_per_mtok: float | None
    output_per_mtok: float | None
    batch_discount: float  # the share of the online price a batch saves

    def cost(self, usage: _Usage) -> float | None:
        """What ``usage`` cost, batch requests at the discount; None without prices."""
        if self.input_per_mtok is None and self.output_per_mtok is None:
            return None
        p_in, p_out = self.input_per_mtok or 0.0, self.output_per_mtok or 0.0
        online = (usage.input_tokens - usage.batch_input_tokens) * p_in + (
            usage.output_tokens - usage.batch_output_tokens
        ) * p_out
        batch = usage.batch_input_tokens * p_in + usage.batch_output_tokens * p_out
        return (online + batch * (1.0 - self.batch_discount)) / 1e6


@dataclass(slots=True)
class _Stream:
    problems: dict[str, JSONDict] = field(default_factory=dict)
    responses: dict[str, _Response] = field(default_factory=dict)  # request id -> response
    usage: dict[str, _RequestUsage] = field(default_factory=dict)  # request id -> its tokens


def _usage_tokens(usage: Any) -> tuple[int, int]:
    # docs/schema.md: input_tokens/output_tokens; imported evidence keeps OpenAI's names.
    if not isinstance(usage, Mapping):
        return 0, 0
    tokens_in = usage.get("input_tokens", usage.get("prompt_tokens")) or 0
    tokens_out = usage.get("output_tokens", usage.get("completion_tokens")) or 0
    return int(tokens_in), int(tokens_out)


def _read_stream(path: Path, texts: _Texts) -> _Stream:
    stream = _Stream()
    with path.open("rb") as handle:
        for _, record in numbered_records(handle, where=str(path), require_kind=True):
            kind = record["kind"]
            if kind == "problem":
                stream.problems[str(record.get("problem_id"))] = record
            elif kind == "response":
                rid = str(record["request_id"])
                endpoint = str(record["endpoint"])
                stream.usage[rid] = _RequestUsage(
                    endpoint, *_usage_tokens(record.get("usage")), record.get("via") == "batch"
                )
                condition = record.get("condition")
                if condition not in CONDITIONS_SHOWN:
                    continue
                error = record.get("error")
                text = record.get("text")
                reasoning = record.get("reasoning")
                text = text if isinstance(text, str) else ""
                stream.responses[rid] = _Response(
                    endpoint=endpoint,
                    problem_id=str(record["problem_id"]),
                    condition=str(condition),
                    premise=record.get("target_premise"),
                    sample=int(record.get("sample_index") or 0),
                    text=texts.add(text) if error is None else texts.add_own(text),
                    reasoning=texts.add(reasoning) if isinstance(reasoning, str) else None,
                    error=None if error is None else _error_text(error),
                )
    return stream


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        return str(error.get("message") or error.get("type") or "error")
    return str(error)


# ---- certificates -> audits ----------------------------------------------------------------


class _Verdicts:
    """The page's verdict table: known verdicts first, others as they appear."""

    def __init__(self) -> None:
        self.names: list[str] = list(KNOWN_VERDICTS)
        self.index = {name: i for i, name in enumerate(self.names)}

    def code(self, name: str | None) -> int | None:
        if name is None:
            return None
        found = self.index.get(name)
        if found is None:
            found = self.index[name] = len(self.names)
            self.names.append(name)
        return found


def _positive(verdict: str | None) -> bool:
    try:
        return verdict is not None and Verdict(verdict).positive
    except ValueError:
        return False


@dataclass(slots=True)
class _Audit:
    run: int
    section: str  # the report section: the endpoint, or ENDPOINT:reasoning
    problem_id: str
    # The pairs' rows, JSON-encoded and comma-separated. One growing buffer per audit: orjson
    # hands each result back in a buffer of several KiB, so keeping them one by one cost ten
    # times their size (measured).
    pairs: bytearray = field(default_factory=bytearray)
    n_pairs: int = 0
    sources: dict[tuple[str, str | None], dict[int, int]] = field(default_factory=dict)
    substitutions: dict[str, Any] = field(default_factory=dict)
    vmask: list[int] = field(default_factory=lambda: [0] * len(EVALUATORS))
    fpmask: list[int] = field(default_factory=lambda: [0] * len(EVALUATORS))
    correct: bool = False  # the report's: its headline's correct_problems
    rawr: list[int] = field(default_factory=lambda: [0] * len(EVALUATORS))  # the report's
    # Per evaluator, what the cards' "order" sorts by: the evaluable gold pairs judged
    # INSENSITIVE, split as the headline splits them (an entity-introduction premise ignored
    # under A is its blind spot, which the page does not rank as a finding), and the false
    # positives. Over a model's audits they sum to its headline's ignored_rule, ignored_entity
    # and false_positives.
    ignored_rule: list[int] = field(default_factory=lambda: [0] * len(EVALUATORS))
    ignored_entity: list[int] = field(default_factory=lambda: [0] * len(EVALUATORS))
    false_positives: list[int] = field(default_factory=lambda: [0] * len(EVALUATORS))


def _status(cert: Mapping[str, Any]) -> str:
    status = str(cert.get("step_status") or "")
    category = cert.get("non_assertion")
    return f"{status}: {category}" if category else status


def _pair(
    cert: Mapping[str, Any],
    line: int,
    audit: _Audit,
    verdicts: _Verdicts,
    causes: Mapping[str, str],
) -> bytes:
    gold = cert.get("gold") or {}
    citation = cert.get("citation") or {}
    excluded = list(cert.get("excluded") or [])
    phi = cert.get("phi") or {}
    delta = cert.get("delta") or {}
    alignment = cert.get("alignment") or {}
    probe_steps = cert.get("probe_steps") or {}
    probe_index = cert.get("probe_step_index") or {}
    flags = 0
    evaluable = not excluded
    is_gold = bool(gold.get("direct_parent"))
    is_entity = bool(gold.get("entity_premise"))
    if evaluable:
        flags |= PAIR_FLAGS["evaluable"]
    if is_gold:
        flags |= PAIR_FLAGS["gold"]
    if is_entity:
        flags |= PAIR_FLAGS["entity"]
    if citation.get("cites"):
        flags |= PAIR_FLAGS["cites"]
    if cert.get("misrepresentation"):
        flags |= PAIR_FLAGS["misrepresentation"]
    codes: list[int | None] = []
    rules: list[str | None] = []
    for e, evaluator in enumerate(EVALUATORS):
        verdict = cert.get(evaluator.verdict_field)
        code = verdicts.code(verdict)
        codes.append(code)
        rules.append(cert.get(evaluator.rule_field) if evaluator.rule_field else None)
        if code is not None:
            audit.vmask[e] |= 1 << code
        if not evaluable or verdict is None:
            continue
        if _positive(verdict) and not is_gold:
            flags |= 1 << (FP_SHIFT + e)
            audit.false_positives[e] += 1
            if code is not None:
                audit.fpmask[e] |= 1 << code
        if is_gold and verdict == IGNORED_VERDICT:
            flags |= 1 << (IGNORED_SHIFT + e)
            (audit.ignored_entity if is_entity else audit.ignored_rule)[e] += 1
    # In PAIR_COLUMNS order (a test reads the pairs back by those names).
    return orjson.dumps(
        [
            cert.get("id"),
            cert.get("cot_step"),
            cert.get("cot_index"),
            cert.get("premise_id"),
            cert.get("proof_step"),
            flags,
            codes,
            rules,
            str(cert.get("sha256") or "")[:SEAL_DIGITS],
            line,
            [phi.get(c) for c in CONDITIONS_SHOWN],
            [delta.get(c) for c in PROBE_CONDITIONS],
            [alignment.get(c) for c in CONDITIONS_SHOWN],
            [probe_steps.get(c) for c in PROBE_CONDITIONS],
            [probe_index.get(c) for c in PROBE_CONDITIONS],
            _status(cert),
            citation.get("evidence") or "",
            excluded,
            causes.get(str(cert.get("id"))),
        ]
    )


def _fp_causes(sections: Mapping[str, Any]) -> dict[str, str]:
    """Certificate id -> why the consistent probe's positive is outside the gold parents."""
    causes = {}
    for section in sections.values():
        for entry in (section or {}).get("false_positives") or []:
            if isinstance(entry, Mapping) and entry.get("cause"):
                causes[str(entry.get("id"))] = str(entry["cause"])
    return causes


def _section_endpoint(name: str, section: Any) -> str:
    """The endpoint whose requests a report section audits (``thinker:reasoning`` is
    ``thinker``'s reasoning trace)."""
    endpoint = section.get("endpoint") if isinstance(section, Mapping) else None
    return str(endpoint) if endpoint is not None else name


def _audits(
    run: int,
    files: RunFiles,
    stream: _Stream,
    verdicts: _Verdicts,
    causes: Mapping[str, str],
    sections: Mapping[str, Any],
) -> dict[tuple[str, str], _Audit]:
    """Per (report section, problem): its pairs and texts. A reasoning model evaluated with
    ``--trace both`` has two sections, ``ENDPOINT`` (the answer's steps) and
    ``ENDPOINT:reasoning`` (the trace's), each with its own audits and texts."""
    audits: dict[tuple[str, str], _Audit] = {}
    for line, cert in read_certificates(files.certificates):
        if "_unreadable" in cert or "endpoint" not in cert or "problem_id" not in cert:
            raise UsageError(
                f"line {line} is not a certificate",
                where=str(files.certificates),
                fix=f"Re-run `cotaudit evaluate {files.run_dir}` (and `cotaudit verify`).",
            )
        trace: Trace = "reasoning" if cert.get("trace") == "reasoning" else "answer"
        key = (section_name(str(cert["endpoint"]), trace), str(cert["problem_id"]))
        audit = audits.get(key)
        if audit is None:
            audit = audits[key] = _Audit(run, *key)
        if audit.n_pairs:
            audit.pairs += b","
        audit.pairs += _pair(cert, line, audit, verdicts, causes)
        audit.n_pairs += 1
        premise = cert.get("premise_id")
        if premise is not None and cert.get("substitution") is not None:
            audit.substitutions[str(premise)] = cert.get("substitution")
        for rid in cert.get("sources") or {}:
            response = stream.responses.get(rid)
            text = None if response is None else response.trace_text(trace)
            if response is None or text is None:
                continue
            slot = (response.condition, response.premise)
            audit.sources.setdefault(slot, {})[response.sample] = text
    # A model whose original was written but no step audited still shows its problem: under
    # each of its sections, and under its answer's where the report has none of it.
    audited = {_section_endpoint(name, section) for name, section in sections.items()}
    for response in stream.responses.values():
        if response.condition != ORIGINAL:
            continue
        for trace in TRACES:
            section = section_name(response.endpoint, trace)
            text = response.trace_text(trace)
            shown = section in sections or (trace == "answer" and response.endpoint not in audited)
            if text is None or not shown:
                continue
            key = (section, response.problem_id)
            audit = audits.get(key)
            if audit is None:
                audit = audits[key] = _Audit(run, *key)
            audit.sources.setdefault((ORIGINAL, None), {})[response.sample] = text
    return audits


# ---- the models' tables -------------------------------------------------------------------


def _prices(manifest: Path | None) -> dict[str, _Prices]:
    if manifest is None:
        return {}
    try:
        endpoints = orjson.loads(manifest.read_bytes())["config"]["endpoints"]
        return {
            str(ep["name"]): _Prices(
                ep.get("price_input_per_mtok"),
                ep.get("price_output_per_mtok"),
                float(ep.get("batch_discount", BATCH_DISCOUNT)),
            )
            for ep in endpoints
        }
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return {}


def _row(entry: Mapping[str, Any]) -> JSONDict:
    return {
        "precision": entry.get("precision"),
        "recall": entry.get("recall"),
        "f1": entry.get("f1"),
        "ci": entry.get("ci"),
        "ci_precision": entry.get("ci_precision"),
        "ci_recall": entry.get("ci_recall"),
        "tp": entry.get("tp"),
        "fp": entry.get("fp"),
        "fn": entry.get("fn"),
        "tn": entry.get("tn"),
    }


# The page's names of each evaluator's headline figures -> report.json headline.found keys.
FOUND_KEYS: dict[str, str] = {
    "judged_gold": "judged",
    "dependent_gold": "dependent",
    "ignored": "ignored",
    "grounded_share": "grounded_share",
    "judged_rule": "judged_rule",
    "dependent_rule": "dependent_rule",
    "ignored_rule": "ignored_rule",
    "grounded_share_rule": "grounded_share_rule",
    "judged_entity": "judged_entity",
    "dependent_entity": "dependent_entity",
    "ignored_entity": "ignored_entity",
    "grounded_share_entity": "grounded_share_entity",
    "false_positives": "false_positives",
    "rawr": "rawr",
    "rawr_rule": "rawr_rule",
    "rawr_entity_only": "rawr_entity_only",
    "correct": "correct",
}


def _found(section: Mapping[str, Any], where: Path) -> list[JSONDict]:
    """Per evaluator: what the audit found about the model, as the report's headline has it."""
    headline = headline_of(section, where)
    rows = section.get("rows") or {}
    out = []
    for evaluator in EVALUATORS:
        found = headline["found"].get(evaluator.report_name) or {}
        entry: JSONDict = {"evaluator": evaluator.key}
        entry.update({page: found.get(key) for page, key in FOUND_KEYS.items()})
        # The grounded share is the row's recall: its interval is the row's recall interval.
        entry["grounded_ci"] = (rows.get(evaluator.report_row) or {}).get("ci_recall")
        entry["problems"] = headline.get("problems")
        # A's figures carry its blind spot: the page sets each beside the same under A+A'.
        entry["blind"] = bool(found.get("blind_spot"))
        out.append(entry)
    return out


def _insensitive(section: Mapping[str, Any], evaluator: str) -> int | None:
    """Evaluable pairs ``evaluator`` judged INSENSITIVE (report.json ``verdict_mix``)."""
    mix = (section.get("verdict_mix") or {}).get(evaluator)
    count = mix.get(IGNORED_VERDICT, 0) if isinstance(mix, Mapping) else None
    return count if isinstance(count, int) else None


def _misrepresentations_beside(section: Mapping[str, Any]) -> JSONDict:
    """What A's misrepresentation count is set beside, as report.md sets it: its denominator
    (the pairs INSENSITIVE under A), and the same under A+A' (rule R_MISREPRESENT_CITED of
    its INSENSITIVE pairs), which sees the entity-introduction premises A counts as ignored."""
    both = (section.get("rule_mix") or {}).get("A+A'")
    cited = both.get(R_MISREPRESENT_CITED, 0) if isinstance(both, Mapping) else None
    return {
        "insensitive": _insensitive(section, "A"),
        "combined": cited if isinstance(cited, int) else None,
        "combined_insensitive": _insensitive(section, "A+A'"),
    }


def _problem_facts(
    sections: Mapping[str, Any], where: Path
) -> dict[str, tuple[frozenset[str], list[frozenset[str]]]]:
    """Per endpoint, from the report: the correctly answered problems, and per evaluator the
    problems with a right answer and wrong reasoning (the filters' facts)."""
    out = {}
    for endpoint, section in sections.items():
        if not isinstance(section, Mapping):
            continue
        headline = headline_of(section, where)
        rawr = [
            frozenset((headline["found"].get(e.report_name) or {}).get("rawr_problems") or ())
            for e in EVALUATORS
        ]
        out[str(endpoint)] = (frozenset(headline.get("correct_problems") or ()), rawr)
    return out


def _model_entry(
    label: str,
    run: int,
    endpoint: str,
    section: Mapping[str, Any],
    where: Path,
    usage: _Usage,
    prices: _Prices | None,
) -> JSONDict:
    rows = section.get("rows") or {}
    rawr = section.get("rawr") or {}
    truth = section.get("truth")
    certificates = section.get("certificates") or {}
    alignment = section.get("alignment") or {}
    accuracy = section.get("accuracy") or {}
    return {
        "label": label,
        "run": run,
        "endpoint": endpoint,
        "identity": section.get("model"),
        "found": _found(section, where) if section else [],
        "accuracy": {
            "problems": accuracy.get("problems"),
            "correct": accuracy.get("correct"),
            "rate": accuracy.get("rate"),
        },
        "rawr_consistent": {
            "rawr": rawr.get("rawr"),
            "correct": rawr.get("correct"),
            "structural_only": rawr.get("structural_only"),
            "predicate": rawr.get("predicate"),
        },
        "misrepresentations": section.get("misrepresentations"),
        "misrepresentations_beside": _misrepresentations_beside(section),
        "n_boot": (section.get("bootstrap") or {}).get("n_boot"),
        "truth": None
        if not isinstance(truth, Mapping)
        else {
            "ignored": truth.get("ignored_premises"),
            "flagged": truth.get("ignored_premises_flagged"),
            "flagged_cascade": truth.get("ignored_premises_flagged_cascade"),
        },
        "rows": {key: _row(rows[key]) for key, *_ in VALIDITY_ROWS if key in rows},
        "parse_rates": {c: (section.get("parse_rates") or {}).get(c) for c in CONDITIONS_SHOWN},
        "certificates": {
            "total": certificates.get("total"),
            "evaluable": certificates.get("evaluable"),
        },
        "alignment": {
            "cot_steps": alignment.get("cot_steps"),
            "matched": alignment.get("matched"),
        },
        "usage": {
            "requests": usage.requests,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "batch_requests": usage.batch_requests,
            "cost": None if prices is None else prices.cost(usage),
            "price_input_per_mtok": None if prices is None else prices.input_per_mtok,
            "price_output_per_mtok": None if prices is None else prices.output_per_mtok,
            "batch_discount": None if prices is None else prices.batch_discount,
        },
    }


# ---- chunks -------------------------------------------------------------------------------


def _problem_entry(record: Mapping[str, Any] | None, problem_id: str) -> JSONDict:
    if record is None:
        return {"id": problem_id, "missing": True}
    return {
        "id": problem_id,
        "question": record.get("question"),
        "premises": [[p.get("id"), p.get("text")] for p in record.get("premises") or []],
        "proof": [
            [s.get("step"), s.get("conclusion"), list(s.get("depends_on") or [])]
            for s in record.get("proof") or []
        ],
        "answer": record.get("answer"),
        "hops": record.get("hops"),
        "distractors": list(record.get("distractors") or []),
    }


def _text_entry(text: str) -> list[Any]:
    # The steps as the audit reads them: step lines, else sentences numbered from 1.
    _, steps = output_steps(text)
    return [text, [[s.number, s.text] for s in steps], extract_true_false_answer(text)]


def _repeats(slot: Mapping[int, int] | None, local: dict[int, int], texts: list[int]) -> list[int]:
    if not slot:
        return []
    out = []
    for sample in sorted(slot):
        gid = slot[sample]
        if gid not in local:
            local[gid] = len(texts)
            texts.append(gid)
        out.append(local[gid])
    return out


def _chunk(
    audits: Sequence[tuple[int, _Audit]],
    problems: Sequence[Mapping[str, JSONDict]],
    texts: _Texts,
    errors: Mapping[int, str],
) -> bytes:
    """The chunk of ``audits``, gzip-compressed JSON; frees their encoded pairs."""
    local_texts: dict[int, int] = {}
    text_ids: list[int] = []
    local_problems: dict[tuple[int, str], int] = {}
    problem_entries: list[JSONDict] = []
    entries = []
    for index, audit in audits:
        pkey = (audit.run, audit.problem_id)
        if pkey not in local_problems:
            local_problems[pkey] = len(problem_entries)
            problem_entries.append(
                _problem_entry(problems[audit.run].get(audit.problem_id), audit.problem_id)
            )
        premises = sorted({p for (c, p) in audit.sources if p is not None})
        entries.append(
            {
                "audit": index,
                "problem": local_problems[pkey],
                "original": _repeats(audit.sources.get((ORIGINAL, None)), local_texts, text_ids),
                "probes": {
                    premise: [
                        _repeats(audit.sources.get((c, premise)), local_texts, text_ids)
                        for c in PROBE_CONDITIONS
                    ]
                    for premise in premises
                },
                "substitutions": audit.substitutions,
                "pairs": orjson.Fragment(b"[" + bytes(audit.pairs) + b"]"),
            }
        )
        audit.pairs = bytearray()
    text_entries = []
    for gid in text_ids:
        entry = _text_entry(texts.values[gid])
        entry.append(errors.get(gid))
        text_entries.append(entry)
    return encode({"problems": problem_entries, "texts": text_entries, "audits": entries})


def _natural_key(problem_id: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", problem_id))


def build_page_data(targets: Sequence[Path], *, chunk_audits: int = CHUNK_AUDITS) -> PageData:
    """The page's data for the evaluated runs ``targets`` (each ``RUN`` or its eval dir)."""
    if not targets:
        raise UsageError("no run given", fix="Give one or more evaluated run directories.")
    files = [locate_run(t) for t in targets]
    labels = run_labels([f.run_dir for f in files])
    texts = _Texts()
    verdicts = _Verdicts()
    errors: dict[int, str] = {}
    models: list[JSONDict] = []
    all_audits: list[tuple[int, int, _Audit]] = []  # (run, model rank, audit)
    problems: list[dict[str, JSONDict]] = []
    endpoint_names = _model_labels(files)
    runs: list[JSONDict] = []
    for run, (run_files, label) in enumerate(zip(files, labels, strict=True)):
        report = read_json(run_files.report)
        sections = model_sections(report, run_files)
        stream = _read_stream(run_files.results, texts)
        for response in stream.responses.values():
            if response.error is not None:
                errors[response.text] = response.error
        audits = _audits(run, run_files, stream, verdicts, _fp_causes(sections), sections)
        facts = _problem_facts(sections, run_files.report)
        for audit in audits.values():
            fact = facts.get(audit.section)
            if fact is None:
                continue  # a model the report lacks (no audited problem): nothing found
            correct, rawr = fact
            audit.correct = audit.problem_id in correct
            audit.rawr = [int(audit.problem_id in problems) for problems in rawr]
        problems.append(stream.problems)
        usage = _usage_by_endpoint(stream.usage)
        prices = _prices(run_files.manifest)
        order = list(sections) + sorted({ep for ep, _ in audits} - set(sections))
        for rank, endpoint in enumerate(order):
            mine = [a for a in audits.values() if a.section == endpoint]
            # A reasoning trace's section is the same requests as its answer's: their usage.
            requests_of = _section_endpoint(endpoint, sections.get(endpoint))
            models.append(
                _model_entry(
                    endpoint_names.get((run, endpoint), endpoint),
                    run,
                    endpoint,
                    sections.get(endpoint) or {},
                    run_files.report,
                    usage.get(requests_of, _Usage()),
                    prices.get(requests_of),
                )
            )
            all_audits.extend((run, rank, a) for a in mine)
        runs.append(
            {
                "label": label,
                # Absolute, as report.json's source is: the page may be opened from anywhere.
                "run_dir": str(run_files.run_dir.resolve()),
                "eval_dir": str(run_files.eval_dir.resolve()),
                "results": str(run_files.results.resolve()),
                "options": report.get("options"),
                # Said above everything: a run interrupted between problems looks whole.
                "incomplete": short_of_plan_note(report),
            }
        )
    model_index = {(m["run"], m["endpoint"]): i for i, m in enumerate(models)}
    all_audits.sort(key=lambda t: (_natural_key(t[2].problem_id), t[0], t[1]))
    chunks: list[bytes] = []
    columns: dict[str, list[Any]] = defaultdict(list)
    problem_ids: list[str] = []
    problem_slot: dict[str, int] = {}
    for start in range(0, len(all_audits), chunk_audits):
        batch = all_audits[start : start + chunk_audits]
        numbered = [(start + i, a) for i, (_, _, a) in enumerate(batch)]
        chunks.append(_chunk(numbered, problems, texts, errors))
        for _, audit in numbered:
            if audit.problem_id not in problem_slot:
                problem_slot[audit.problem_id] = len(problem_ids)
                problem_ids.append(audit.problem_id)
            columns["model"].append(model_index[(audit.run, audit.section)])
            columns["problem"].append(problem_slot[audit.problem_id])
            columns["chunk"].append(len(chunks) - 1)
            columns["correct"].append(audit.correct)
            columns["pairs"].append(audit.n_pairs)
            columns["vmask"].append(audit.vmask)
            columns["fpmask"].append(audit.fpmask)
            columns["rawr"].append(list(audit.rawr))
            columns["ignored_rule"].append(audit.ignored_rule)
            columns["ignored_entity"].append(audit.ignored_entity)
            columns["false_positives"].append(audit.false_positives)
    index: JSONDict = {
        "format": PAGE_FORMAT,
        "generator": f"cotaudit {__version__}",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": runs,
        "models": models,
        "evaluators": [
            {"key": e.key, "label": e.label, "meaning": e.meaning, "row": e.report_row}
            for e in EVALUATORS
        ],
        "verdicts": [
            {"name": name, "positive": _positive(name), "skipped": name in SKIPPED_VERDICTS}
            for name in verdicts.names
        ],
        "validity_rows": [
            {"key": k, "label": label, "meaning": meaning, "blind": blind, "primary": primary}
            for k, label, meaning, blind, primary in VALIDITY_ROWS
        ],
        "conditions": list(CONDITIONS_SHOWN),
        "probe_conditions": list(PROBE_CONDITIONS),
        "pair_columns": list(PAIR_COLUMNS),
        "pair_flags": PAIR_FLAGS,
        "seal_digits": SEAL_DIGITS,
        "fp_shift": FP_SHIFT,
        "ignored_shift": IGNORED_SHIFT,
        "problems": problem_ids,
        "audits": dict(columns),
        "chunk_audits": chunk_audits,
    }
    return PageData(index=index, chunks=chunks)


def _model_labels(files: Sequence[RunFiles]) -> dict[tuple[int, str], str]:
    """``endpoint (run label)`` where an endpoint name occurs in more than one run."""
    if len(files) < 2:
        return {}
    labels = run_labels([f.run_dir for f in files])
    seen: dict[str, list[int]] = defaultdict(list)
    for run, run_files in enumerate(files):
        models = read_json(run_files.report).get("models") or {}
        for endpoint in models:
            seen[str(endpoint)].append(run)
    return {
        (run, endpoint): f"{endpoint} ({labels[run]})"
        for endpoint, found in seen.items()
        if len(found) > 1
        for run in found
    }


def _usage_by_endpoint(usage: Mapping[str, _RequestUsage]) -> dict[str, _Usage]:
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    for request in usage.values():
        total = totals[request.endpoint]
        total[0] += 1
        total[1] += request.input_tokens
        total[2] += request.output_tokens
        if request.batch:
            total[3] += 1
            total[4] += request.input_tokens
            total[5] += request.output_tokens
    return {
        ep: _Usage(
            requests=t[0],
            input_tokens=t[1],
            output_tokens=t[2],
            batch_requests=t[3],
            batch_input_tokens=t[4],
            batch_output_tokens=t[5],
        )
        for ep, t in totals.items()
    }


def encode(value: Any) -> bytes:
    """JSON, gzip-compressed (deterministic: no timestamp in the gzip header)."""
    return gzip.compress(orjson.dumps(value), compresslevel=6, mtime=0)


def iter_encoded(data: PageData) -> Iterator[bytes]:
    """The index, then each chunk, encoded."""
    yield encode(data.index)
    yield from data.chunks
