"""The stream's contract: record kinds and their validator, the schema version, canonical JSON
and hashing, reading whole lines, and the run directory's layout.

This is the only thing the runner (which writes the stream) and the evaluator (which reads it)
share about records; ``docs/schema.md`` documents it field by field.
"""

from cotaudit.schema.canonical import canonical_json, sha256_hex
from cotaudit.schema.jsonl import bad_line, iter_records, numbered_records, read_records
from cotaudit.schema.records import (
    CONDITIONS,
    KINDS,
    PROBE_CONDITIONS,
    SCHEMA_VERSION,
    Condition,
    JSONDict,
    Message,
    validate_record,
)
from cotaudit.schema.rundir import EVAL_DIRNAME, MANIFEST_NAME, RESULTS_NAME

__all__ = [
    "CONDITIONS",
    "EVAL_DIRNAME",
    "KINDS",
    "MANIFEST_NAME",
    "PROBE_CONDITIONS",
    "RESULTS_NAME",
    "SCHEMA_VERSION",
    "Condition",
    "JSONDict",
    "Message",
    "bad_line",
    "canonical_json",
    "iter_records",
    "numbered_records",
    "read_records",
    "sha256_hex",
    "validate_record",
]
