"""The QA sets built here: every answer can be kept only by keeping its gold chunk.

``licenses-qa.jsonl`` and ``manpages-qa.jsonl`` (``benchmarks/data``) are built
once by their ``make_*_qa.py`` from text installed on the build machine and
committed; this checks the committed rows with the benchmark's own
normalisation, so a rebuild against other package versions cannot quietly give
a question a second chunk that holds its answer, or an answer that a chunk's
opening words, or the question itself, already give away.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETS = {"licenses": ("LICENSES", 12), "manpages": ("MANPAGES", 12)}
"""Each set: the benchmark's name for its file; the fewest sources its gold chunks span."""


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capsa_bench_compression",
                                                  ROOT / "benchmarks" / "compression.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
    return module


def _rows(name: str) -> list[dict[str, Any]]:
    path = ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("name", SETS)
def test_the_benchmark_reads_the_file_checked_here(bench: ModuleType, name: str) -> None:
    assert getattr(bench, SETS[name][0]) == ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"


@pytest.mark.parametrize("name", SETS)
def test_a_set_holds_forty_eight_questions_of_nine_chunks(name: str) -> None:
    rows = _rows(name)
    assert len(rows) == 48
    assert len({row["question_id"] for row in rows}) == len(rows)
    assert all(len(row["contexts"]) == 9 for row in rows)
    assert all(sum(c["is_supporting"] for c in row["contexts"]) == 1 for row in rows)


@pytest.mark.parametrize("name", SETS)
def test_each_answer_is_in_its_gold_chunk_and_in_no_distractor(bench: ModuleType,
                                                                name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        holding = [c["is_supporting"] for c in row["contexts"]
                   if answer in bench.normalise(c["paragraph_text"])]
        assert holding == [True], row["question_id"]


@pytest.mark.parametrize("name", SETS)
def test_no_answer_opens_its_gold_chunk_or_is_in_its_question(bench: ModuleType,
                                                               name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        gold = next(c for c in row["contexts"] if c["is_supporting"])
        assert not bench.normalise(gold["paragraph_text"]).startswith(answer), row["question_id"]
        assert answer not in bench.normalise(row["question_text"]), row["question_id"]


@pytest.mark.parametrize("name", SETS)
def test_the_questions_span_the_sources(name: str) -> None:
    sources = {next(c["title"] for c in row["contexts"] if c["is_supporting"])
               for row in _rows(name)}
    assert len(sources) >= SETS[name][1]
