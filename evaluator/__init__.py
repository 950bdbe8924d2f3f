"""cotaudit evaluator: JSONL stream -> verdicts, certificates, statistics, reports.

It imports ``cotaudit`` (the stream's schema, the domain types, errors and constants) and
never ``runner``: it reads only the stream.
"""
