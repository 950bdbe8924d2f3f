"""Response latency of the local server: fixed, uniform or lognormal, seedable.

A :class:`LatencySpec` is a frozen description (what ``cotaudit serve --latency`` parses);
a :class:`LatencySampler` draws delays from it with its own seeded RNG, so two servers with
the same spec and seed delay the same request sequence identically.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from cotaudit.errors import UsageError

LatencyKind = Literal["fixed", "uniform", "lognormal"]

_FORMS = "fixed:SECONDS, uniform:LOW,HIGH or lognormal:MEDIAN,SIGMA (seconds)"
_VALUE_NAMES = {"fixed": ("SECONDS",), "uniform": ("LOW", "HIGH"), "lognormal": ("MEDIAN", "SIGMA")}
# A lognormal draw is MEDIAN * e^(SIGMA * g), g a Gaussian draw (Python's reach about 8.6):
# a SIGMA above about 80 overflows (the request a 500), and long before that the tail is
# absurd (hosted APIs: about 0.5 to 1), so a larger SIGMA is a slip such as milliseconds
# typed for seconds.
LOGNORMAL_MAX_SIGMA = 10.0
_SIGMA_FIX = (
    "SIGMA is the standard deviation of the delay's logarithm, not seconds: give e.g. "
    "lognormal:0.3,0.6 (hosted APIs: about 0.5 to 1)"
)


@dataclass(frozen=True, slots=True)
class LatencySpec:
    """How long the server waits before answering, in seconds.

    - ``fixed``: always ``a``.
    - ``uniform``: uniform on ``[a, b]``.
    - ``lognormal``: median ``a``, log-scale standard deviation ``b`` (a long right tail,
      like real APIs).
    """

    kind: LatencyKind = "fixed"
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.a < 0 or self.b < 0 or not (math.isfinite(self.a) and math.isfinite(self.b)):
            raise UsageError(
                f"latency parameters must be finite and >= 0, got {self.a}, {self.b}",
                where="latency",
                fix=f"give {_FORMS}",
            )
        if self.kind == "uniform" and self.b < self.a:
            raise UsageError(
                f"uniform latency needs LOW <= HIGH, got {self.a} > {self.b}",
                where="latency",
                fix="swap the bounds",
            )
        if self.kind == "lognormal" and self.b > LOGNORMAL_MAX_SIGMA:
            raise UsageError(
                f"lognormal SIGMA must be <= {LOGNORMAL_MAX_SIGMA:g}, got {self.b}",
                where="latency",
                fix=_SIGMA_FIX,
            )

    @property
    def is_zero(self) -> bool:
        """True when every draw is 0 (the server then skips sleeping entirely)."""
        return self.a == 0.0 and (self.kind != "uniform" or self.b == 0.0)

    @classmethod
    def parse(cls, text: str) -> LatencySpec:
        """Parse ``fixed:0.05``, ``uniform:0.01,0.05``, ``lognormal:0.2,0.5`` or ``0.05``.

        A refusal quotes the text as typed and names the value at fault (``SECONDS``,
        ``LOW``, ``HIGH``, ``MEDIAN``, ``SIGMA``), not the parsed numbers.
        """
        kind, sep, rest = text.strip().partition(":")
        if not sep:
            kind, rest = "fixed", text.strip()
        names = _VALUE_NAMES.get(kind)
        parts = [part.strip() for part in rest.split(",")]
        if names is None or len(parts) != len(names) or not (sep or _is_float(rest)):
            raise UsageError(
                f"cannot read latency {text!r}", where="--latency", fix=f"give {_FORMS}"
            )
        values: list[float] = []
        for name, part in zip(names, parts, strict=True):
            if not _is_float(part):
                raise UsageError(
                    f"latency {text!r}: {name} {part!r} is not a number",
                    where="--latency",
                    fix=f"give {_FORMS}",
                )
            value = float(part)
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(
                    f"latency {text!r}: {name} must be finite and >= 0, got {part}",
                    where="--latency",
                    fix=f"give {_FORMS}",
                )
            values.append(value)
        if kind == "fixed":
            return cls("fixed", values[0])
        low, high = values
        if kind == "uniform":
            if high < low:
                raise UsageError(
                    f"latency {text!r}: LOW {parts[0]} is above HIGH {parts[1]}",
                    where="--latency",
                    fix=f"swap the bounds: uniform:{parts[1]},{parts[0]}",
                )
            return cls("uniform", low, high)
        if high > LOGNORMAL_MAX_SIGMA:
            raise UsageError(
                f"latency {text!r}: SIGMA must be <= {LOGNORMAL_MAX_SIGMA:g}, got {parts[1]}",
                where="--latency",
                fix=_SIGMA_FIX,
            )
        return cls("lognormal", low, high)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class LatencySampler:
    """Draws delays (seconds) from a :class:`LatencySpec` with a private seeded RNG."""

    def __init__(self, spec: LatencySpec, *, seed: int = 0) -> None:
        self.spec = spec
        self._rng = random.Random(seed)

    def sample(self) -> float:
        spec = self.spec
        if spec.kind == "fixed":
            return spec.a
        if spec.kind == "uniform":
            return self._rng.uniform(spec.a, spec.b)
        if spec.a == 0.0:
            return 0.0
        return spec.a * math.exp(self._rng.gauss(0.0, spec.b))
