"""User-facing errors.

A ``UsageError`` is bad input (a config, a file, a flag): the CLI prints its message and exits
with status 2 without writing anything (a response cache that cannot be opened is one). A
``CacheError`` is a response cache that fails during a run (a lookup locked past its timeout,
a database gone bad): the CLI prints it and exits with status 1.
Messages say what was wrong, where, and what to do.
"""

from __future__ import annotations

from cotaudit.caller_terms import run_with


class UsageError(Exception):
    """Bad input from the user; the command exits with status 2."""

    exit_code = 2

    def __init__(
        self,
        what: str,
        *,
        where: str | None = None,
        fix: str | None = None,
        in_run_terms: bool = False,
    ) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        # The fix names cotaudit run's own settings (its run_dir key, its --run-dir, --shard or
        # --retry-errors as cotaudit.caller_terms spells them for the caller, another run
        # directory of the user's choosing). A command that runs a sweep into a directory of
        # its own (demo, reproduce) has none of them and gives its own advice instead
        # (cotaudit.commands.sweep_advice).
        self.in_run_terms = in_run_terms
        parts = [f"{where}: {what}" if where else what]
        if fix:
            parts.append(fix)
        super().__init__(" ".join(parts) if fix is None else f"{parts[0]}. {fix}")


class CacheError(Exception):
    """The response cache at ``directory`` failed during a run (a lookup that failed)."""

    def __init__(self, directory: object, cause: BaseException) -> None:
        self.directory = directory
        super().__init__(
            f"the response cache {directory} cannot be used ({cause}). The run stopped; what "
            "it wrote is in its stream. Fix the cache, point cache_dir at another directory "
            f"or run without one ({run_with('no_cache', config=False)}), and rerun the same "
            "command: the run resumes where it stopped"
        )
