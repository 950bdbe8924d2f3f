"""cotaudit: interventional audits of whether a model's chain of thought depends on its premises.

The distribution's face. ``cotaudit.schema`` is the stream both halves share, ``cotaudit.domain``
the problems they speak about; the runner (``runner``) writes the stream and the evaluator
(``evaluator``) reads it. The Python API (``docs/api.md``) is re-exported here.
"""

__version__ = "0.1.0"

from cotaudit.api import (
    ModelReport,
    Rawr,
    Report,
    Row,
    Verification,
    arun,
    evaluate,
    load_config,
    run,
    selection,
    verify,
)
from cotaudit.errors import UsageError

__all__ = [
    "ModelReport",
    "Rawr",
    "Report",
    "Row",
    "UsageError",
    "Verification",
    "__version__",
    "arun",
    "evaluate",
    "load_config",
    "run",
    "selection",
    "verify",
]
