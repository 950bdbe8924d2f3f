"""cotaudit evaluator: JSONL stream -> verdicts, certificates, statistics, reports.

The evaluator reads only the stream; it never imports the runner's engine (it may import
the pure record and problem models in ``runner.records`` and ``runner.tasks``).
"""
