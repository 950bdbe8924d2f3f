"""User-facing errors.

A ``UsageError`` is bad input (a config, a file, a flag): the CLI prints its message and exits
with status 2 without writing anything. A ``CacheError`` is a response cache that cannot be
used (not a database, locked past its timeout): the CLI prints it and exits with status 1.
Messages say what was wrong, where, and what to do.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user; the command exits with status 2."""

    exit_code = 2

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        parts = [f"{where}: {what}" if where else what]
        if fix:
            parts.append(fix)
        super().__init__(" ".join(parts) if fix is None else f"{parts[0]}. {fix}")


class CacheError(Exception):
    """The response cache at ``directory`` cannot be opened or read."""

    def __init__(self, directory: object, cause: BaseException) -> None:
        self.directory = directory
        super().__init__(
            f"the response cache {directory} cannot be used ({cause}). Point cache_dir at "
            "another directory, or move this one away; the run's stream is intact"
        )
