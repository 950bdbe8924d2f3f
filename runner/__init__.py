"""cotaudit runner: tasks and probes -> request specs -> providers -> one JSONL stream.

It imports ``cotaudit`` (the stream's schema, the domain types, errors and constants) and
never ``evaluator``: the stream is the only contract between the two halves.
"""
