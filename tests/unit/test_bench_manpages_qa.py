"""benchmarks/data/manpages-qa.jsonl: every answer can be kept only by keeping its gold chunk.

The file is built once by ``make_manpages_qa.py`` from the manual pages
installed on the build machine and committed; this checks the committed rows
with the benchmark's own normalisation, so a rebuild against other package
versions cannot quietly give a question a second chunk that holds its answer,
or an answer that a chunk's opening words already give away.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "manpages-qa.jsonl"


@pytest.fixture(scope="module")
def normalise() -> Any:
    spec = importlib.util.spec_from_file_location("capsa_bench_compression",
                                                  ROOT / "benchmarks" / "compression.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
    assert module.MANPAGES == DATA  # the benchmark reads the file checked here
    return module.normalise


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text("utf-8").splitlines()]


def test_the_set_holds_forty_eight_questions_of_nine_chunks() -> None:
    rows = _rows()
    assert len(rows) == 48
    assert len({row["question_id"] for row in rows}) == len(rows)
    assert all(len(row["contexts"]) == 9 for row in rows)
    assert all(sum(c["is_supporting"] for c in row["contexts"]) == 1 for row in rows)


def test_each_answer_is_in_its_gold_chunk_and_in_no_distractor(normalise: Any) -> None:
    for row in _rows():
        answer = normalise(row["answers_objects"][0]["spans"][0])
        holding = [c["is_supporting"] for c in row["contexts"]
                   if answer in normalise(c["paragraph_text"])]
        assert holding == [True], row["question_id"]


def test_no_answer_opens_its_gold_chunk(normalise: Any) -> None:
    for row in _rows():
        answer = normalise(row["answers_objects"][0]["spans"][0])
        gold = next(c for c in row["contexts"] if c["is_supporting"])
        assert not normalise(gold["paragraph_text"]).startswith(answer), row["question_id"]


def test_no_question_gives_its_answer_away(normalise: Any) -> None:
    for row in _rows():
        answer = normalise(row["answers_objects"][0]["spans"][0])
        assert answer not in normalise(row["question_text"]), row["question_id"]


def test_the_questions_span_many_pages() -> None:
    pages = {next(c["title"] for c in row["contexts"] if c["is_supporting"])
             for row in _rows()}
    assert len(pages) >= 12
