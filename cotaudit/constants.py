"""Every default and limit of cotaudit (runner, local server and evaluator), in one place, with
units. The stream's schema version is the contract's, in ``cotaudit.schema``."""

from __future__ import annotations

# Integers a user may write (config keys, task tables, flags): 64 bits, signed, what the
# stream's JSON (orjson), the request hashes and the providers' APIs take (cotaudit/values.py).
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

# Retry policy (openai-python's shape: min(base * 2**n, cap) with full jitter).
RETRY_MAX_ATTEMPTS = 8  # attempts per request, the first included
RETRY_BASE_DELAY_S = 0.5  # seconds
RETRY_MAX_DELAY_S = 60.0  # seconds: ceiling of one backoff sleep, server hints included
REQUEST_TIME_BUDGET_S = 600.0  # seconds: total time one request may take across attempts

# HTTP
CONNECT_TIMEOUT_S = 10.0  # seconds
# The official OpenAI and Anthropic Python SDKs' default. A reasoning model's answer can take
# minutes; an attempt cut short was still sent, and may be billed, so a short default would
# pay for one request several times over.
READ_TIMEOUT_S = 600.0  # seconds, per attempt
MODEL_LIST_MAX_PAGES = 100  # pages of a paged (Anthropic) model listing preflight reads
AUTH_FAILURES_BEFORE_STOP = 3  # permanent 401/403 on one endpoint before dispatch stops
# Answer bodies: longer ones are refused unread (docs/transport.md, "Bounded answers"). An
# endpoint's limit is BASE + PER_TOKEN * max_tokens (a token is ~4 characters; UTF-8 and JSON
# escapes can make a character 6 bytes, and reasoning traces count against max_tokens too),
# never more than MAX.
RESPONSE_BODY_BASE_BYTES = 64 * 1024  # bytes: JSON envelope, usage, headers-like fields
RESPONSE_BODY_BYTES_PER_TOKEN = 64  # bytes per max_tokens
RESPONSE_BODY_MAX_BYTES = 64 * 1024 * 1024  # bytes: the ceiling of any answer

# Engine
DEFAULT_RPM = 600.0  # requests per minute per endpoint
DEFAULT_TPM = 1_000_000.0  # tokens per minute per endpoint
DEFAULT_MAX_TOKENS = 512  # output tokens
FSYNC_INTERVAL_S = 1.0  # seconds between fsyncs of results.jsonl (every record is flushed)
SHUTDOWN_GRACE_S = 3.0  # seconds in-flight requests get to finish after Ctrl-C
PROGRESS_INTERVAL_S = 10.0  # seconds between plain progress lines when not on a terminal

# Engine: adapting to the server (docs/engine.md)
AUTO_CONCURRENCY_INITIAL = 32  # in-flight requests "auto" starts at (the former fixed default)
AUTO_CONCURRENCY_MAX = 1024  # the most in-flight requests "auto" grows to
OUTAGE_FAILURES = 10  # consecutive connection failures, timeouts or 5xx before an endpoint is down
OUTAGE_FIRST_PROBE_S = 1.0  # seconds before the first probe of a down endpoint; doubles after
OUTAGE_MAX_PROBE_INTERVAL_S = 60.0  # seconds: the longest wait between two probes
OUTAGE_BUDGET_S = 1800.0  # seconds an endpoint may be down in all before the run stops it

# Providers' parameter ranges beyond ../shared/PROVIDERS.md (docs/servers.md)
ANTHROPIC_MAX_TEMPERATURE = 1.0  # Messages API: temperature in [0, 1]

# Audit workload (docs/protocol.md)
SELF_CONSISTENCY_SAMPLES = 5
SELF_CONSISTENCY_TEMPERATURE = 0.7

# Local model server
LOCAL_HOST = "127.0.0.1"

# Local model server (runner/server/): defaults of `cotaudit serve` and ServerConfig
SERVER_DEFAULT_PORT = 8765  # TCP port of `cotaudit serve` (tests and running_server use 0)
SERVER_FAULT_RETRY_AFTER_S = 1.0  # seconds advertised by injected 429 faults
SERVER_HANG_LIMIT_S = 30.0  # seconds a "hang" fault holds a request before resetting it
SERVER_SHUTDOWN_TIMEOUT_S = 0.5  # seconds in-flight handlers get when the server stops
SERVER_START_TIMEOUT_S = 10.0  # seconds start_server_thread waits for the server to listen

# Providers' batch API limits (../shared/PROVIDERS.md; the local server enforces them too)
OPENAI_BATCH_MAX_REQUESTS = 50_000  # requests per batch input file
OPENAI_BATCH_MAX_BYTES = 200_000_000  # bytes per batch input file (200 MB)
ANTHROPIC_BATCH_MAX_REQUESTS = 100_000  # requests per Message Batch
ANTHROPIC_BATCH_MAX_BYTES = 256_000_000  # bytes of a Message Batch create request (256 MB)
BATCH_COMPLETION_WINDOW_S = 86_400.0  # seconds a batch may take before it expires (24 h)
BATCH_DISCOUNT = 0.5  # share of the online price the providers' batch APIs take off
BATCH_POLL_S = 60.0  # seconds between a runner's looks at a pending batch
# Batch file uploads and downloads (runner/providers/api_client.py, transfer_timeout): no
# total timeout, since a 200 MB file takes as long as the link needs; a transfer times out
# when no byte moves for this long (or the endpoint's timeout_s, where that is longer).
BATCH_TRANSFER_STALL_S = 300.0  # seconds without a byte
BATCH_UPLOAD_MIN_BYTES_PER_S = 50_000  # bytes per second: a slower upload times out
# A results download is read line by line, a line being one answer: a line longer than
# RESPONSE_BODY_MAX_BYTES is no answer, and is not held in memory to find out.
API_ERROR_BODY_MAX_BYTES = 1024 * 1024  # bytes of an error answer kept for its message

# Selection study (docs/selection.md): task kind "procedural" (runner/tasks/procedural/)
PROCEDURAL_MIN_STRATUM = 1  # operations an intervention touches: smallest stratum
PROCEDURAL_MAX_STRATUM = 5  # operations: largest stratum (inclusive)
PROCEDURAL_PER_STRATUM = 10  # instances per family and stratum
PROCEDURAL_STRATUM_LIMIT = 20  # operations: the generators' name pools cover up to this

# Evaluator statistics (docs/decision-layer.md; evaluator/bootstrap.py, baselines.py)
BOOTSTRAP_RESAMPLES = 10_000  # resamples of problems per interval
BOOTSTRAP_CONFIDENCE = 0.95  # two-sided percentile interval
BOOTSTRAP_SEED = 20260710  # default seed of the index matrix (recorded in every report)
BOOTSTRAP_CHUNK_CELLS = 1 << 17  # problem indices drawn and gathered at once (1 MiB as intp)
SELF_CONSISTENCY_THRESHOLD = 0.8  # share of parseable samples holding the majority conclusion
# Steps of one output the evaluator reads: later steps are left unread and the output is
# reported as capped (docs/evaluator-scale.md, "Bounded cost per output"). Real chains of
# thought and reasoning traces stay far below it; a hostile server's 200,000-line answer
# does not.
MAX_STEPS_PER_OUTPUT = 2_000  # steps (or sentences) per output

# Output files (cotaudit/output_file.py): how much of an existing file is read to tell what
# wrote it. Every output a command may write over (a plan's first lines, a page's head, a
# rescore or selection report whole) fits in it many times over.
OUTPUT_IDENTIFY_BYTES = 4 * 1024 * 1024  # bytes read from the start of an existing file
