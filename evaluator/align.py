"""Alignment by content: CoT steps to proof steps, and probe steps to proof steps.

Step numbers are never used to pair steps: models restate premises first, or reason over the
rules ("frenpuses are frolnuses") before naming the entity, and either shifts every number.

Original output (:func:`align_original`): a CoT step matches the proof step whose canonical
conclusion it states. A problem is *ambiguous* (excluded whole) when a proof step is matched
by two CoT steps or a CoT step matches two proof steps.

Probe output (:func:`align_probe`): for each matched proof step ``t``, in proof order, the
probe step that corresponds to it is found by the first rule that applies:

1. ``exact`` - a probe step states ``t``'s conclusion;
2. ``substituted`` - a probe step states ``t``'s conclusion with the probe's substitution
   applied (``is(stella, bunkus)`` -> ``is(stella, zqbunkus)``);
3. ``chain_position`` - for an entity-level ``t`` whose conclusion changed, when every step
   parent of ``t`` has a counterpart (``t`` is reached from the same earlier steps): the
   first entity-level assertion about the same entity after those counterparts (and before
   the counterparts of ``t``'s descendants) that is not used by another proof step and is
   not a restatement (of a premise passed in ``premises``, or of a proposition the original CoT
   states that is no proof conclusion, with or without the substitution);
4. ``missing`` - no counterpart: reported, excluded, never counted as a change.

Rules 1 and 2 run for every proof step before rule 3, so a content match is never taken away
by a positional guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

from cotaudit.domain.problem import ProofStep
from cotaudit.domain.proposition import Proposition, parse_canonical
from evaluator.canon import ParsedCot, ParsedStep

UnmatchedReason: TypeAlias = Literal["no_proof_step", "non_assertion", "unparseable"]
ProbeRule: TypeAlias = Literal["exact", "substituted", "chain_position", "missing"]


@dataclass(frozen=True, slots=True)
class StepMatch:
    """CoT step ``cot_step`` (its written number) states proof step ``proof_step``'s conclusion."""

    cot_step: int
    proof_step: int
    conclusion: Proposition
    cot_index: int = -1  # position in ``ParsedCot.steps`` (step numbers may repeat)


@dataclass(frozen=True, slots=True)
class UnmatchedStep:
    """A CoT step that matches no proof step, and why (a restatement is ``no_proof_step``)."""

    cot_step: int
    reason: UnmatchedReason
    prop: Proposition | None
    cot_index: int = -1  # position in ``ParsedCot.steps`` (step numbers may repeat)


@dataclass(frozen=True, slots=True)
class OriginalAlignment:
    """The original CoT against the proof.

    ``matches`` in CoT order; ``unaudited`` proof steps no CoT step states; ``ambiguous`` with
    the reasons in ``ambiguity`` (the problem is then excluded from the primary metrics).
    """

    matches: tuple[StepMatch, ...]
    unmatched: tuple[UnmatchedStep, ...]
    unaudited: tuple[int, ...]
    ambiguous: bool
    ambiguity: tuple[str, ...]
    # Propositions the original CoT states that are no proof conclusion (restated premises,
    # in whole steps or in "since" clauses): never a chain-position counterpart in a probe.
    restatements: frozenset[Proposition] = frozenset()
    # Lookups by position, built once: a long output asks for every one of its positions, and
    # a scan of the matches per position made the audit quadratic in its steps.
    _proof_step_by_index: dict[int, int] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _unmatched_by_index: dict[int, UnmatchedReason] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for m in self.matches:
            self._proof_step_by_index.setdefault(m.cot_index, m.proof_step)
        for u in self.unmatched:
            self._unmatched_by_index.setdefault(u.cot_index, u.reason)

    def cot_step_for(self, proof_step: int) -> int | None:
        """The CoT step matched to ``proof_step`` (the first, when ambiguous)."""
        return next((m.cot_step for m in self.matches if m.proof_step == proof_step), None)

    def proof_step_at(self, cot_index: int) -> int | None:
        """The proof step matched to the CoT step at position ``cot_index`` (0-based; the
        first, when ambiguous). Written numbers may repeat (a restarted chain); positions not."""
        return self._proof_step_by_index.get(cot_index)

    def unmatched_reason_at(self, cot_index: int) -> UnmatchedReason | None:
        """Why the CoT step at position ``cot_index`` matches no proof step (None: matched)."""
        return self._unmatched_by_index.get(cot_index)

    def proof_step_for(self, cot_step: int) -> int | None:
        """The proof step matched to CoT step ``cot_step`` (the first, when ambiguous)."""
        return next((m.proof_step for m in self.matches if m.cot_step == cot_step), None)

    @property
    def matched_proof_steps(self) -> tuple[int, ...]:
        """Proof steps with a CoT counterpart, in proof order, without repeats."""
        return tuple(sorted({m.proof_step for m in self.matches}))


@dataclass(frozen=True, slots=True)
class ProbeMatch:
    """The counterpart of proof step ``proof_step`` in one probe output.

    ``probe_step`` is the probe step's written number (None when ``rule`` is ``missing``) and
    ``conclusion`` its canonical conclusion (the ``phi`` of that condition).
    """

    proof_step: int
    probe_step: int | None
    rule: ProbeRule
    conclusion: Proposition | None
    probe_index: int | None = None  # position in the probe's ``ParsedCot.steps``


@dataclass(frozen=True, slots=True)
class ProbeAlignment:
    """One probe output against the matched proof steps of the original."""

    matches: tuple[ProbeMatch, ...]

    def for_proof_step(self, proof_step: int) -> ProbeMatch:
        """The match for ``proof_step``; KeyError when it was not matched in the original."""
        for m in self.matches:
            if m.proof_step == proof_step:
                return m
        raise KeyError(proof_step)

    @property
    def missing(self) -> tuple[int, ...]:
        """Proof steps with no counterpart in this probe output."""
        return tuple(m.proof_step for m in self.matches if m.rule == "missing")


def proof_conclusions(proof: Sequence[ProofStep]) -> dict[int, Proposition]:
    """Proof step number -> canonical conclusion; ValueError naming a malformed step."""
    out: dict[int, Proposition] = {}
    for step in proof:
        try:
            out[step.step] = parse_canonical(step.conclusion)
        except ValueError as exc:
            raise ValueError(
                f"proof step S{step.step}: conclusion {step.conclusion!r} is not canonical "
                "(expected e.g. 'is(alex, bempus)'); fix the problem record"
            ) from exc
    return out


def align_original(parsed: ParsedCot, proof: Sequence[ProofStep]) -> OriginalAlignment:
    """Match each step of the original CoT to the proof step with the same conclusion."""
    conclusions = proof_conclusions(proof)
    by_prop: dict[Proposition, list[int]] = {}
    for number, prop in conclusions.items():
        by_prop.setdefault(prop, []).append(number)

    matches: list[StepMatch] = []
    unmatched: list[UnmatchedStep] = []
    ambiguity: list[str] = []
    for index, step in enumerate(parsed.steps):
        reading = step.reading
        if reading.status != "assertion" or reading.prop is None:
            reason: UnmatchedReason = (
                "non_assertion" if reading.status == "non_assertion" else "unparseable"
            )
            unmatched.append(UnmatchedStep(step.number, reason, None, index))
            continue
        targets = by_prop.get(reading.prop, [])
        if not targets:
            unmatched.append(UnmatchedStep(step.number, "no_proof_step", reading.prop, index))
            continue
        if len(targets) > 1:
            ambiguity.append(
                f"CoT step {step.number} ({reading.prop}) matches proof steps "
                + ", ".join(f"S{t}" for t in targets)
            )
        matches.extend(StepMatch(step.number, t, reading.prop, index) for t in targets)

    counts: dict[int, list[int]] = {}
    for m in matches:
        counts.setdefault(m.proof_step, []).append(m.cot_step)
    for proof_step, cot_steps in sorted(counts.items()):
        if len(cot_steps) > 1:
            ambiguity.append(
                f"proof step S{proof_step} is matched by CoT steps "
                + ", ".join(str(c) for c in cot_steps)
            )
    unaudited = tuple(n for n in sorted(conclusions) if n not in counts)
    stated = {c.prop for s in parsed.steps for c in s.reading.clauses if c.prop is not None}
    return OriginalAlignment(
        tuple(matches),
        tuple(unmatched),
        unaudited,
        bool(ambiguity),
        tuple(ambiguity),
        frozenset(stated - set(by_prop)),
    )


def substitute(prop: Proposition, substitution: Mapping[str, str]) -> Proposition:
    """``prop`` with every name renamed by ``substitution`` (keys and values canonical)."""
    return Proposition(
        prop.kind,
        substitution.get(prop.subject, prop.subject),
        substitution.get(prop.object, prop.object),
    )


def _step_parents(proof: Sequence[ProofStep]) -> dict[int, tuple[int, ...]]:
    return {
        s.step: tuple(int(d[1:]) for d in s.depends_on if d.startswith("S") and d[1:].isdigit())
        for s in proof
    }


def _ancestors(step: int, parents: Mapping[int, tuple[int, ...]]) -> set[int]:
    seen: set[int] = set()
    todo = list(parents.get(step, ()))
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(parents.get(p, ()))
    return seen


@dataclass(frozen=True, slots=True)
class ProofIndex:
    """What probe alignment reads of a proof, computed once per problem: each step's
    canonical conclusion, its step parents, and its descendants (steps that have it as an
    ancestor). ``ValueError`` naming a step whose conclusion is not canonical."""

    conclusions: Mapping[int, Proposition]
    parents: Mapping[int, tuple[int, ...]]
    descendants: Mapping[int, tuple[int, ...]]

    @classmethod
    def of(cls, proof: Sequence[ProofStep]) -> ProofIndex:
        parents = _step_parents(proof)
        ancestors = {d: _ancestors(d, parents) for d in parents}
        descendants = {t: tuple(d for d in parents if t in ancestors[d]) for t in parents}
        return cls(proof_conclusions(proof), parents, descendants)


def align_probe(
    probe: ParsedCot,
    original: OriginalAlignment,
    proof: Sequence[ProofStep] | ProofIndex,
    *,
    substitution: Mapping[str, str] | None = None,
    premises: Iterable[Proposition] = (),
) -> ProbeAlignment:
    """Find, by content, the probe step corresponding to each matched proof step.

    ``substitution`` maps canonical names (``{"bunkus": "zqbunkus"}``); ``premises`` are
    premises as propositions (pass the original problem's and the probe's): a probe step that
    merely restates one of them is never taken as a chain-position counterpart. ``proof`` may
    be a :class:`ProofIndex` built once for the problem. See the module docstring for the rules.
    """
    index = proof if isinstance(proof, ProofIndex) else ProofIndex.of(proof)
    return ProbeAligner(index, original).align(probe, substitution=substitution, premises=premises)


class IndexedSteps(Protocol):
    """A parsed output's assertion steps, (position, step, conclusion) in order, and the
    positions (in that list) at which each conclusion is stated."""

    @property
    def assertions(self) -> Sequence[tuple[int, ParsedStep, Proposition]]: ...

    @property
    def stated(self) -> Mapping[Proposition, Sequence[int]]: ...


@dataclass(frozen=True, slots=True)
class _Indexed:
    assertions: tuple[tuple[int, ParsedStep, Proposition], ...]
    stated: Mapping[Proposition, tuple[int, ...]]


def index_steps(parsed: ParsedCot) -> IndexedSteps:
    """The :class:`IndexedSteps` of a parsed output."""
    assertions: list[tuple[int, ParsedStep, Proposition]] = []
    stated: dict[Proposition, list[int]] = {}
    for i, s in enumerate(parsed.steps):
        prop = s.reading.prop
        if s.reading.status == "assertion" and prop is not None:
            stated.setdefault(prop, []).append(len(assertions))
            assertions.append((i, s, prop))
    return _Indexed(tuple(assertions), {p: tuple(at) for p, at in stated.items()})


class ProbeAligner:
    """:func:`align_probe` against one original alignment, prepared once for all the probe
    outputs of a problem (every premise, condition and repeat)."""

    __slots__ = ("_conclusions", "_index", "_original", "_substituted", "_wanted")

    def __init__(self, index: ProofIndex, original: OriginalAlignment) -> None:
        self._index = index
        self._original = original
        self._wanted = original.matched_proof_steps
        self._conclusions = index.conclusions
        # substitution -> each wanted step's substituted conclusion (None: unchanged by it);
        # a premise's consistent and local probes share their substitution.
        self._substituted: dict[tuple[tuple[str, str], ...], dict[int, Proposition | None]] = {}

    def _targets(self, subst: Mapping[str, str]) -> dict[int, Proposition | None]:
        key = tuple(sorted(subst.items()))
        found = self._substituted.get(key)
        if found is None:
            found = {}
            for t in self._wanted:
                renamed = substitute(self._conclusions[t], subst)
                found[t] = None if renamed == self._conclusions[t] else renamed
            self._substituted[key] = found
        return found

    def align(
        self,
        probe: ParsedCot | IndexedSteps,
        *,
        substitution: Mapping[str, str] | None = None,
        premises: Iterable[Proposition] = (),
    ) -> ProbeAlignment:
        """The counterparts in ``probe`` of every matched proof step (module docstring).
        ``probe`` may come with its assertion steps indexed already (:class:`IndexedSteps`)."""
        conclusions = self._conclusions
        subst = {k.lower(): v.lower() for k, v in (substitution or {}).items()}
        # Assertion steps by position, and the positions at which each proposition is stated:
        # every rule then looks a proposition up instead of scanning the output.
        if isinstance(probe, ParsedCot):
            probe = index_steps(probe)
        steps = probe.assertions
        stated = probe.stated

        wanted = self._wanted
        found: dict[int, tuple[int, ProbeRule]] = {}  # proof step -> (assertion position, rule)
        used: set[int] = set()
        substituted = self._targets(subst)
        rules: tuple[ProbeRule, ...] = ("exact", "substituted")
        for rule in rules:
            for t in wanted:
                if t in found:
                    continue
                target = conclusions[t] if rule == "exact" else substituted[t]
                if target is None:
                    continue  # the substitution leaves this conclusion as it is
                for position in stated.get(target, ()):
                    if position not in used:
                        found[t] = (position, rule)
                        used.add(position)
                        break

        restated: set[Proposition] | None = None
        for t in wanted:
            if t in found or conclusions[t].kind not in ("is", "not_is"):
                continue
            if restated is None:
                restated = set(premises)
                for prop in self._original.restatements:
                    restated.add(prop)
                    restated.add(substitute(prop, subst))
            candidate = self._chain_candidate(t, steps, found, used, restated)
            if candidate is not None:
                found[t] = (candidate, "chain_position")
                used.add(candidate)

        matches = []
        for t in wanted:
            if t in found:
                position, rule = found[t]
                i, s, prop = steps[position]
                matches.append(ProbeMatch(t, s.number, rule, prop, i))
            else:
                matches.append(ProbeMatch(t, None, "missing", None))
        return ProbeAlignment(tuple(matches))

    def _chain_candidate(
        self,
        t: int,
        steps: Sequence[tuple[int, ParsedStep, Proposition]],
        found: Mapping[int, tuple[int, ProbeRule]],
        used: set[int],
        restated: set[Proposition],
    ) -> int | None:
        # "Reached from the same earlier matched steps": every step parent of t needs a
        # counterpart, otherwise the probe's chain broke before t and t has no place in it.
        parents = self._index.parents.get(t, ())
        if any(p not in found for p in parents):
            return None
        after = max((found[p][0] for p in parents), default=-1)
        descendants = self._index.descendants.get(t, ())
        before = min((found[d][0] for d in descendants if d in found), default=len(steps))
        entity = self._conclusions[t].subject
        for position in range(after + 1, before):
            prop = steps[position][2]
            if (
                position not in used
                and prop.kind in ("is", "not_is")
                and prop.subject == entity
                and prop not in restated
            ):
                return position
        return None
