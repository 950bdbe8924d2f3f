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

    @property
    def is_zero(self) -> bool:
        """True when every draw is 0 (the server then skips sleeping entirely)."""
        return self.a == 0.0 and (self.kind != "uniform" or self.b == 0.0)

    @classmethod
    def parse(cls, text: str) -> LatencySpec:
        """Parse ``fixed:0.05``, ``uniform:0.01,0.05``, ``lognormal:0.2,0.5`` or ``0.05``."""
        kind, sep, rest = text.strip().partition(":")
        if not sep:
            kind, rest = "fixed", text
        try:
            values = [float(v) for v in rest.split(",")]
        except ValueError:
            raise UsageError(
                f"cannot read latency {text!r}", where="--latency", fix=f"give {_FORMS}"
            ) from None
        expected = {"fixed": 1, "uniform": 2, "lognormal": 2}
        if kind not in expected or len(values) != expected[kind]:
            raise UsageError(
                f"cannot read latency {text!r}", where="--latency", fix=f"give {_FORMS}"
            )
        if kind == "fixed":
            return cls("fixed", values[0])
        return cls("uniform" if kind == "uniform" else "lognormal", values[0], values[1])


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
