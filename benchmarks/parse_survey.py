"""Parser survey on real model outputs: run ``python benchmarks/parse_survey.py [DATA_DIR]``.

Reads ``../shared/data`` beside the repository (or DATA_DIR) and prints the parse rates of
GPT-4o's evidence pack per condition, the native-style survey of Llama-2-70B and Mistral-7B
(the numbers in docs/parsing.md) and the parser's speed, cold and with its caches warm.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

from evaluator.canon import clear_caches, parse_cot
from evaluator.parse_survey import native_report, survey_native, survey_pack


def _pack(pack: Path) -> None:
    survey = survey_pack(pack)
    for condition in survey.steps:
        print(
            f"gpt-4o {condition:10s} {survey.parsed[condition]:5d}/{survey.steps[condition]:5d}"
            f" = {survey.rate(condition):.2%}  {survey.statuses[condition]}"
        )
    texts = [
        orjson.loads(f.read_bytes())["raw_response"]
        for f in sorted(pack.glob("p*/original_cot.json")) + sorted(pack.glob("p*/probes/*"))
    ]
    clear_caches()
    start = time.perf_counter()
    n = sum(len(parse_cot(t).steps) for t in texts)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    sum(len(parse_cot(t).steps) for t in texts)
    warm = time.perf_counter() - start
    print(
        f"parse {len(texts)} outputs ({n} steps): cold {cold:.3f} s ({n / cold:,.0f} steps/s), "
        f"cached {warm:.3f} s ({n / warm:,.0f} steps/s), cache speed-up {cold / warm:.1f}x"
    )


def _native(data: Path) -> None:
    problems = orjson.loads((data / "prontoqa-500" / "dev.json").read_bytes())
    surveys = []
    for model in ("llama-2-70b", "mistral-7b"):
        path = data / "real-cot" / f"{model}.json"
        if path.exists():
            surveys.append(survey_native(model, orjson.loads(path.read_bytes()), problems))
    print(native_report(surveys))
    for s in surveys:
        print(s.model, "unparsed examples:", dict(s.unparsed_examples))


def main(argv: list[str]) -> int:
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    data = Path(argv[1]) if len(argv) > 1 else default
    pack = data / "grounding-audit-gpt4o" / "evidence" / "gpt-4o"
    if not pack.is_dir() and not (data / "prontoqa-500" / "dev.json").exists():
        print(f"no data under {data}: pass the shared data directory", file=sys.stderr)
        return 2
    if pack.is_dir():
        _pack(pack)
    if (data / "prontoqa-500" / "dev.json").exists():
        _native(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
