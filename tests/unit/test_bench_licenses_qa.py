"""benchmarks/data/licenses-qa.jsonl: every answer can be kept only by keeping its gold chunk.

The file is built once by ``make_licenses_qa.py`` from ``/usr/share/common-licenses``
and committed; this checks the committed rows with the benchmark's own
normalisation, so a rebuild on another system cannot quietly give a question a
second chunk that holds its answer.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "licenses-qa.jsonl"


@pytest.fixture(scope="module")
def normalise() -> Any:
    spec = importlib.util.spec_from_file_location("capsa_bench_compression",
                                                  ROOT / "benchmarks" / "compression.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
    return module.normalise


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text("utf-8").splitlines()]


def test_the_set_holds_forty_to_fifty_questions_of_nine_chunks() -> None:
    rows = _rows()
    assert 40 <= len(rows) <= 50
    assert len({row["question_id"] for row in rows}) == len(rows)
    assert all(len(row["contexts"]) == 9 for row in rows)
    assert all(sum(c["is_supporting"] for c in row["contexts"]) == 1 for row in rows)


def test_each_answer_is_in_its_gold_chunk_and_in_no_distractor(normalise: Any) -> None:
    for row in _rows():
        answer = normalise(row["answers_objects"][0]["spans"][0])
        holding = [c["is_supporting"] for c in row["contexts"]
                   if answer in normalise(c["paragraph_text"])]
        assert holding == [True], row["question_id"]


def test_no_question_gives_its_answer_away(normalise: Any) -> None:
    for row in _rows():
        answer = normalise(row["answers_objects"][0]["spans"][0])
        assert answer not in normalise(row["question_text"]), row["question_id"]
