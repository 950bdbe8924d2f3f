"""cotaudit runner: tasks and probes -> request specs -> providers -> one JSONL stream."""

__version__ = "0.1.0"
