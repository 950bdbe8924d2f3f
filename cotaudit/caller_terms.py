"""Options named as the caller names them: the command line's flags, or the Python API's
arguments.

The runner and the evaluator serve both ``cotaudit run``/``evaluate`` and ``cotaudit.run``/
``evaluate`` (``cotaudit.api``), and their advice names options: "skip this check with
--no-preflight". A notebook's caller types ``preflight=False`` instead, and has no
``--run-dir`` at all (the config's ``run_dir`` key is its way). So a message names an option
through this module, never as a literal flag: :func:`option` (``--no-preflight`` or
``preflight=False``; ``--shard 0/4`` or ``shard="0/4"``), :func:`label` (``--shard`` or
``shard``, as a message's ``where``), :func:`without` (``no --shard`` or
``shard=None``), :func:`key_or_option` (a config key and the option that overrides it),
:func:`run_with` (the run command, or the call, with one option).

The caller's spelling table is held in a ``ContextVar``: the command line's by default, so
that every command's messages read as they always have, the API's within :func:`api_terms`,
which each function of ``cotaudit.api`` runs in. asyncio tasks (the sweep's workers) and
``asyncio.to_thread`` inherit it; a thread started with ``threading.Thread`` does not, so
``cotaudit.api.run``'s worker thread runs in a copy of its caller's context. The
evaluator's worker processes (``evaluator.parallel``, spawned) start with the default table:
what they raise is about a record's shape (``evaluator.jobs``), whose messages name no option.
A message built there that names one would need the table sent with the job's settings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

Option = Literal["no_preflight", "retry_errors", "no_cache", "shard", "run_dir", "out", "eval_dir"]


@dataclass(frozen=True, slots=True)
class Terms:
    """One caller's spelling of the options that messages advise.

    ``options``: each option as the caller gives it; a valued one (``--shard``, ``shard=``)
    without its value. None: the caller has no such option, and ``instead`` says what it does
    in its place. ``run``: how the caller runs a sweep; ``api``: whether this is the Python
    API's table, which gives a value as Python does (``shard="0/4"``)."""

    options: Mapping[Option, str | None]
    instead: Mapping[Option, str]
    run: str
    api: bool


CLI = Terms(
    options={
        "no_preflight": "--no-preflight",
        "retry_errors": "--retry-errors",
        "no_cache": "--no-cache",
        "shard": "--shard",
        "run_dir": "--run-dir",
        "out": "--out",
        "eval_dir": "--eval-dir",
    },
    instead={},
    run="cotaudit run",
    api=False,
)

API = Terms(
    options={
        "no_preflight": "preflight=False",
        "retry_errors": "retry_errors=True",
        "no_cache": "use_cache=False",
        "shard": "shard=",
        "run_dir": None,
        "out": "out=",
        "eval_dir": "eval_dir=",
    },
    # run() takes its run directory from the config only.
    instead={"run_dir": "the config's run_dir key"},
    run="cotaudit.run",
    api=True,
)

_CURRENT: ContextVar[Terms] = ContextVar("cotaudit_caller_terms", default=CLI)


def current() -> Terms:
    """The spelling table of the caller now being served."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(terms: Terms) -> Iterator[None]:
    """Within the block, messages name options as ``terms`` spells them."""
    token = _CURRENT.set(terms)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def api_terms() -> contextlib.AbstractContextManager[None]:
    """Within the block, messages name the Python API's arguments (``cotaudit.api``)."""
    return using(API)


def option(name: Option, value: str | None = None) -> str:
    """``name`` as the caller gives it, with ``value`` if given: ``--shard 0/4`` or
    ``shard="0/4"``. An option the caller does not have is what it does instead (the API's
    ``the config's run_dir key``)."""
    terms = current()
    spelt = terms.options[name]
    if spelt is None:
        return terms.instead[name]
    if value is None:
        return spelt
    return f'{spelt}"{value}"' if terms.api else f"{spelt} {value}"


def label(name: Option) -> str:
    """``name`` as a message's ``where``: the flag (``--shard``) or the argument (``shard``)."""
    return option(name).removesuffix("=")


def without(name: Option) -> str:
    """A valued option not given: ``no --shard`` or ``shard=None``."""
    terms = current()
    spelt = terms.options[name]
    assert spelt is not None, f"{name} is no option of this caller's to leave out"
    return f"{spelt}None" if terms.api else f"no {spelt}"


def key_or_option(key: str, name: Option, *, sep: str = " or ", value: str | None = None) -> str:
    """The config key ``key`` and the option ``name`` that overrides it, the ways the caller
    has of setting one thing: ``run_dir or --run-dir``; the API, which takes the run
    directory from the config only, ``the config's run_dir key``."""
    terms = current()
    if terms.options[name] is None:
        return f"the config's {key} key"
    return f"{key}{sep}{option(name, value)}"


def run_with(name: Option, *, config: bool = True) -> str:
    """A sweep run with option ``name``: ``cotaudit run CONFIG --retry-errors`` (``config``
    false: ``cotaudit run --retry-errors``) or ``cotaudit.run(config, retry_errors=True)``."""
    terms = current()
    if terms.api:
        return f"{terms.run}(config, {option(name)})"
    return f"{terms.run}{' CONFIG' if config else ''} {option(name)}"
