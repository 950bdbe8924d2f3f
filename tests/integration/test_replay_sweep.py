"""The paper's 50 problems (original and every probe) swept through the real engine against
GPT-4o's recorded outputs, replayed by the local server: zero unknown prompts, every text the
recorded one.

Self-consistency samples are not part of the sweep: the pack keeps only their summaries.
A consistent and a local probe of a premise whose target predicate occurs in that premise
only have the same prompt (GPT-4o was asked it twice and the pack holds both answers); the
request carries nothing that tells them apart and the engine's cache rightly treats them as
one request, so for those prompts the text must be one of the two recorded answers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.schema import read_records
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.server import replay
from runner.server.lifecycle import running_server
from runner.server.settings import ServerConfig

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"
EVIDENCE = PACK / "evidence" / "gpt-4o"
PROBLEMS = PACK / "data" / "prontoqa_50"
CONDITIONS = {"semantic": "consistent", "local": "local", "surface": "surface"}

pytestmark = pytest.mark.skipif(
    not EVIDENCE.is_dir(), reason=f"evidence pack not found at {EVIDENCE}"
)


@pytest.fixture(autouse=True)
def _clear_replay() -> Iterator[None]:
    yield
    replay.configure([])


def _recorded() -> dict[tuple[str, str, str | None], dict[str, Any]]:
    """(problem, condition, target premise) -> the pack's output record."""
    out: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for path in sorted(EVIDENCE.glob("p*/original_cot.json")):
        out[(path.parent.name, "original", None)] = orjson.loads(path.read_bytes())
    for path in sorted(EVIDENCE.glob("p*/probes/*.json")):
        kind, _, premise = path.stem.rpartition("_")
        key = (path.parent.parent.name, CONDITIONS[kind], premise)
        out[key] = orjson.loads(path.read_bytes())
    return out


async def test_paper_sweep_replays_every_recorded_output(tmp_path: Path) -> None:
    recorded = _recorded()
    assert len(recorded) == 890
    texts_by_prompt: dict[str, set[str]] = defaultdict(set)
    for record in recorded.values():
        texts_by_prompt[record["prompt"]].add(record["raw_response"])

    async with running_server(ServerConfig(replay=(PACK,))) as server:
        config = config_from_mapping(
            {
                "run_dir": "run",
                "cache_dir": "cache",
                "task": {
                    "kind": "prontoqa",
                    "source": "paper50",
                    "path": str(PROBLEMS),
                    "samples": 0,
                    "fresh_words_from": str(EVIDENCE),
                },
                "endpoints": [
                    {
                        "name": "gpt4o-replay",
                        "provider": "local",
                        "model": "replay:model=gpt-4o",
                        "base_url": server.base_url,
                        "requests_per_minute": 1e9,
                        "tokens_per_minute": 1e12,
                        "max_concurrency": 16,
                        "max_tokens": 4096,
                    }
                ],
            },
            config_dir=tmp_path,
        )
        summary = await run_sweep(config, progress=False)

    assert summary.errors == 0
    responses = [
        r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"
    ]
    assert len(responses) == len(recorded) == summary.written
    shared = 0
    for response in responses:
        key = (response["problem_id"], response["condition"], response["target_premise"])
        record = recorded[key]
        where = "/".join(str(k) for k in key)
        assert response["error"] is None, where
        prompt = response["messages"][-1]["content"]
        assert prompt == record["prompt"], f"{where}: the sweep's prompt is not the pack's"
        candidates = texts_by_prompt[prompt]
        if len(candidates) == 1:
            assert response["text"] == record["raw_response"], where
        else:
            shared += 1
            assert response["condition"] in ("consistent", "local"), where
            assert response["text"] in candidates, where
    # the ambiguous prompts are exactly the pack's consistent/local pairs with one prompt
    assert shared == sum(2 for texts in texts_by_prompt.values() if len(texts) > 1)
    assert shared < len(responses) // 4
