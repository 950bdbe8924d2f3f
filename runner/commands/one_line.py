"""One-line runs: ``cotaudit run --model PROVIDER/MODEL`` without a TOML file.

``--model`` names one endpoint; the rest is the default audit (``docs/command-line.md``,
"One-line runs"): the paper's ProntoQA grounding audit (50 generated problems, seed 0, 3 to 5
hops, 1 to 3 distractors, 5 self-consistency samples at 0.7), into ``runs/PROVIDER-MODEL``
under the current directory, with the platform's shared response cache. The key comes from
the provider's usual environment variable.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from cotaudit.constants import SELF_CONSISTENCY_SAMPLES, SELF_CONSISTENCY_TEMPERATURE
from cotaudit.errors import UsageError
from runner.config import SweepConfig, config_from_mapping

# The task of a one-line run: the settings of examples/audit-openai.toml (the paper's).
DEFAULT_TASK: dict[str, Any] = {
    "kind": "prontoqa",
    "source": "generate",
    "n": 50,
    "hops_min": 3,
    "hops_max": 5,
    "distractors": [1, 3],
    "seed": 0,
    "samples": SELF_CONSISTENCY_SAMPLES,
    "sample_temperature": SELF_CONSISTENCY_TEMPERATURE,
}
RUNS_DIR = "runs"  # one-line run directories go under this, in the current directory
# provider -> (the endpoint's provider, its key variable)
PROVIDERS: dict[str, tuple[str, str | None]] = {
    "openai": ("openai", "OPENAI_API_KEY"),
    "anthropic": ("anthropic", "ANTHROPIC_API_KEY"),
    "local": ("local", None),
    # vLLM, llama.cpp, Ollama, `cotaudit serve`: the key only when the variable is set (a
    # self-hosted server at an http:// or loopback URL needs none).
    "openai-compatible": ("openai", "OPENAI_API_KEY"),
}
# The embedded server answers as fast as the machine allows: no client-side pacing.
LOCAL_RATES = {"requests_per_minute": 600_000, "tokens_per_minute": 1e10}
FORMS = (
    "openai/MODEL, anthropic/MODEL, local/MODEL or openai-compatible/NAME@http://HOST:PORT/v1 "
    "(e.g. --model openai/gpt-4o)"
)


def slug(text: str) -> str:
    """``text`` as an endpoint name and a directory name: letters, digits, '-', '_', '.'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "model"


def shown(spec: str) -> str:
    """``spec`` as a message may repeat it: a URL's user-info part and query masked.

    The config refuses a base_url that carries a key there without repeating the URL
    (``runner/config.py``); the ``--model`` the message is about must not repeat it either.
    """
    spec = re.sub(r"//[^/@\s]*@", "//***@", spec)
    return re.sub(r"[?#]\S*", "?***", spec)


def parse_model(spec: str) -> tuple[str, str, str | None]:
    """``PROVIDER/MODEL`` (or ``openai-compatible/NAME@URL``) -> (provider, model, base_url)."""
    provider, sep, model = spec.partition("/")
    if not sep or provider not in PROVIDERS or not model.strip():
        raise UsageError(
            f"cannot read the model {shown(spec)!r}"
            if sep
            else f"{shown(spec)!r} names no provider",
            where="--model",
            fix=f"Give {FORMS}.",
        )
    base_url = None
    if provider == "openai-compatible":
        model, at, base_url = model.partition("@")
        if not at or not model or not base_url:
            raise UsageError(
                "an openai-compatible model needs the server's URL after '@'",
                where="--model",
                fix="Give e.g. --model openai-compatible/llama-3-8b@http://127.0.0.1:8000/v1.",
            )
    return provider, model, base_url


def config_for_model(spec: str, *, cwd: Path) -> SweepConfig:
    """The default audit of the one endpoint ``spec`` names (validated like a TOML file)."""
    provider, model, base_url = parse_model(spec)
    kind, key_env = PROVIDERS[provider]
    endpoint: dict[str, Any] = {"name": slug(model), "provider": kind, "model": model}
    if provider == "openai-compatible" and not os.environ.get(str(key_env)):
        key_env = None
    if key_env is not None:
        endpoint["api_key_env"] = key_env
    if base_url is not None:
        endpoint["base_url"] = base_url
    if provider == "local":
        endpoint.update(LOCAL_RATES)
    table = {
        "run_dir": f"{RUNS_DIR}/{provider}-{slug(model)}",
        "task": dict(DEFAULT_TASK),
        "endpoints": [endpoint],
    }
    return config_from_mapping(table, config_dir=cwd, where=f"--model {shown(spec)}")
