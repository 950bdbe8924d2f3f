"""Shared fixtures for the task tests: the real data beside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


@pytest.fixture(scope="session")
def pack_dir() -> Path:
    """The GPT-4o evidence pack of seed 002, or a skip when it is absent."""
    path = DATA / "grounding-audit-gpt4o"
    if not path.is_dir():
        pytest.skip(f"evidence pack not found at {path} (../shared/data beside the repo)")
    return path


@pytest.fixture(scope="session")
def dev_json() -> Path:
    path = DATA / "prontoqa-500" / "dev.json"
    if not path.is_file():
        pytest.skip(f"Logic-LM ProntoQA dev set not found at {path}")
    return path


@pytest.fixture(scope="session")
def native_dir() -> Path:
    path = DATA / "prontoqa-native"
    if not path.is_dir():
        pytest.skip(f"ProntoQA native files not found at {path}")
    return path
