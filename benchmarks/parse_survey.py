"""Parser survey on real model outputs: run ``python benchmarks/parse_survey.py``.

Reads ``../shared/data`` beside the repository (or the directory given as the first
argument) and prints the parse rates of GPT-4o's evidence pack per condition, the
native-style survey of Llama-2-70B and Mistral-7B (docs/parsing.md) and the parser's speed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

from evaluator.canon import parse_cot
from evaluator.parse_survey import native_report, survey_native, survey_pack


def main(argv: list[str]) -> int:
    data = (
        Path(argv[1])
        if len(argv) > 1
        else Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
    pack = data / "grounding-audit-gpt4o" / "evidence" / "gpt-4o"
    if pack.is_dir():
        survey = survey_pack(pack)
        for condition in survey.steps:
            print(
                f"gpt-4o {condition:10s} {survey.parsed[condition]:5d}/{survey.steps[condition]:5d}"
                f" = {survey.rate(condition):.2%}  {survey.statuses[condition]}"
            )
    dev = data / "prontoqa-500" / "dev.json"
    if dev.exists():
        problems = orjson.loads(dev.read_bytes())
        surveys = []
        for model in ("llama-2-70b", "mistral-7b"):
            path = data / "real-cot" / f"{model}.json"
            if path.exists():
                surveys.append(survey_native(model, orjson.loads(path.read_bytes()), problems))
        print(native_report(surveys))
        for s in surveys:
            print(s.model, dict(s.unparsed_examples))
        texts = [str(r["predicted_reasoning"]) for r in orjson.loads(path.read_bytes())]
        # Speed without the cache: distinct texts, each parsed once, cold.
        start = time.perf_counter()
        n = sum(
            len(parse_cot(t + f" Filler{i} is a wumpus.", style="sentences").steps)
            for i, t in enumerate(texts)
        )
        elapsed = time.perf_counter() - start
        print(f"cold parse: {n} sentences in {elapsed:.2f} s = {n / elapsed:,.0f} sentences/s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
