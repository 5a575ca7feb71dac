"""The QA sets built here: every answer can be kept only by keeping its gold chunk.

The hand-written sets (``licenses``, ``manpages``, ``docstrings``,
``docstrings-long``, ``releasenotes``) are built once by their ``make_*_qa.py``
from text installed on the build machine and committed, ``hotpot-single``
from the shared HotpotQA file, and the sets built from published QA data
(``squad-open``, ``covid``, ``tatqa``) from the extracts in
``benchmarks/data/raw``; this checks the committed rows with the benchmark's
own normalisation, so a rebuild against other package versions or a recopied
extract cannot quietly give a question a second chunk that holds its answer,
or an answer that a chunk's opening words, or the question itself, already
give away. The sentence chunker two builders share is checked on generated
text. The held-out set (``readmes``, never tuned on) gets the hand-written
sets' checks, is rebuilt from its copied READMEs, and is checked to run only
when named.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SETS = {"licenses": ("LICENSES", 12, 48), "manpages": ("MANPAGES", 12, 48),
        "docstrings": ("DOCSTRINGS", 15, 46), "docstrings-long": ("DOCSTRINGS_LONG", 15, 46),
        "releasenotes": ("RELEASENOTES", 4, 32)}
"""Each hand-written set: the benchmark's name for its file; the fewest sources its
gold chunks span; how many questions it holds."""
BUILT = {"squad-open": ("SQUAD_OPEN", 319, 10, 3, True), "covid": ("COVID", 60, 10, 8, False),
         "tatqa": ("TATQA", 62, 10, 20, False),
         "hotpot-single-windows": ("HOTPOT_SINGLE_WINDOWS", 244, 10, 200, True),
         "squad-open-windows": ("SQUAD_OPEN_WINDOWS", 297, 10, 3, True),
         "covid-windows": ("COVID_WINDOWS", 58, 10, 8, True)}
"""Each set built from a published QA dataset: the benchmark's name for its file; how
many questions it holds; passages per question; the fewest titles its gold passages
span; whether an answer may open its gold passage (open-domain paragraphs often start
with their subject, as ``hotpot-single``'s do)."""
HELD_OUT = {"readmes": ("READMES", 14, 59)}
"""Each held-out set, hand-written after the rules were frozen and ten passages a
question: the benchmark's name for its file; the fewest sources its gold chunks span;
how many questions it holds."""


@pytest.fixture(scope="module")
def bench(bench_scripts: Any) -> ModuleType:
    return bench_scripts.load("compression")


@pytest.fixture(scope="module")
def qa_sets(bench_scripts: Any) -> ModuleType:
    return bench_scripts.load("qa_sets", ROOT / "benchmarks" / "data" / "qa_sets.py")


def _rows(name: str) -> list[dict[str, Any]]:
    path = ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("name", SETS)
def test_the_benchmark_reads_the_file_checked_here(bench: ModuleType, name: str) -> None:
    assert getattr(bench, SETS[name][0]) == ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"


@pytest.mark.parametrize("name", SETS)
def test_a_set_holds_its_questions_of_nine_chunks(name: str) -> None:
    rows = _rows(name)
    assert len(rows) == SETS[name][2]
    assert len({row["question_id"] for row in rows}) == len(rows)
    assert all(len(row["contexts"]) == 9 for row in rows)
    assert all(sum(c["is_supporting"] for c in row["contexts"]) == 1 for row in rows)


@pytest.mark.parametrize("name", [*SETS, *HELD_OUT])
def test_each_answer_is_in_its_gold_chunk_and_in_no_distractor(bench: ModuleType,
                                                                name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        holding = [c["is_supporting"] for c in row["contexts"]
                   if answer in bench.normalise(c["paragraph_text"])]
        assert holding == [True], row["question_id"]


@pytest.mark.parametrize("name", [*SETS, *HELD_OUT])
def test_no_answer_opens_its_gold_chunk_or_is_in_its_question(bench: ModuleType,
                                                               name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        gold = next(c for c in row["contexts"] if c["is_supporting"])
        assert not bench.normalise(gold["paragraph_text"]).startswith(answer), row["question_id"]
        assert answer not in bench.normalise(row["question_text"]), row["question_id"]


@pytest.mark.parametrize("name", [*SETS, *HELD_OUT])
def test_the_questions_span_the_sources(name: str) -> None:
    sources = {next(c["title"] for c in row["contexts"] if c["is_supporting"])
               for row in _rows(name)}
    assert len(sources) >= {**SETS, **HELD_OUT}[name][1]


def test_hotpot_single_has_one_passage_holding_each_answer(bench: ModuleType) -> None:
    rows = _rows("hotpot-single")
    assert len(rows) == 339
    assert all(len(row["contexts"]) == 10 for row in rows)
    for row in rows:
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        holding = [c["is_supporting"] for c in row["contexts"]
                   if answer in bench.normalise(c["paragraph_text"])]
        assert holding == [True], row["question_id"]


@pytest.mark.parametrize("name", [*SETS, *BUILT, *HELD_OUT, "hotpot-single", "pydocs"])
def test_about_a_third_of_each_set_is_set_aside_and_both_halves_are_filled(
        bench: ModuleType, name: str) -> None:
    parts = [bench.part(row["question_id"]) for row in _rows(name)]
    aside = sum(p == ("aside",) for p in parts) / len(parts)
    assert 0.15 < aside < 0.5
    assert {p[-1] for p in parts} == {"aside", "dev-a", "dev-b"}


@pytest.mark.parametrize("name", BUILT)
def test_the_benchmark_reads_the_built_set_checked_here(bench: ModuleType, name: str) -> None:
    assert getattr(bench, BUILT[name][0]) == ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"
    assert bench.SETS[name][1] == ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"


@pytest.mark.parametrize("name", BUILT)
def test_a_built_set_holds_its_questions_each_with_one_gold_passage_and_titles(
        name: str) -> None:
    _, questions, passages, _, _ = BUILT[name]
    rows = _rows(name)
    assert len(rows) == questions
    assert len({row["question_id"] for row in rows}) == len(rows)
    assert all(len(row["contexts"]) == passages for row in rows)
    assert all(sum(c["is_supporting"] for c in row["contexts"]) == 1 for row in rows)
    assert all(c["title"].strip() for row in rows for c in row["contexts"])


@pytest.mark.parametrize("name", BUILT)
def test_a_built_sets_answer_is_in_its_gold_passage_and_in_no_distractor(
        bench: ModuleType, name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        holding = [c["is_supporting"] for c in row["contexts"]
                   if answer in bench.normalise(c["paragraph_text"])]
        assert holding == [True], row["question_id"]


@pytest.mark.parametrize("name", BUILT)
def test_a_built_sets_answer_is_no_yes_or_no_and_not_in_its_question(
        bench: ModuleType, name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        assert answer not in ("", "yes", "no"), row["question_id"]
        assert answer not in bench.normalise(row["question_text"]), row["question_id"]


@pytest.mark.parametrize("name", [name for name in BUILT if not BUILT[name][4]])
def test_a_built_sets_answer_opens_no_gold_passage_unless_open_domain(
        bench: ModuleType, name: str) -> None:
    for row in _rows(name):
        answer = bench.normalise(row["answers_objects"][0]["spans"][0])
        gold = next(c for c in row["contexts"] if c["is_supporting"])
        assert not bench.normalise(gold["paragraph_text"]).startswith(answer), row["question_id"]


@pytest.mark.parametrize("name", BUILT)
def test_a_built_sets_gold_passages_span_its_sources(name: str) -> None:
    titles = {next(c["title"] for c in row["contexts"] if c["is_supporting"])
              for row in _rows(name)}
    assert len(titles) >= BUILT[name][3]


@pytest.mark.parametrize("name", HELD_OUT)
def test_the_benchmark_runs_a_held_out_set_only_when_named(bench: ModuleType,
                                                          name: str) -> None:
    path = ROOT / "benchmarks" / "data" / f"{name}-qa.jsonl"
    assert getattr(bench, HELD_OUT[name][0]) == path
    assert bench.HELD_OUT[name][1] == path
    assert name not in bench.SETS
    assert name not in bench.set_paths()
    assert bench.set_paths(held_out=True)[name][1] == path


@pytest.mark.parametrize("name", HELD_OUT)
def test_a_held_out_set_holds_its_questions_of_ten_titled_passages(name: str) -> None:
    rows = _rows(name)
    assert len(rows) == HELD_OUT[name][2]
    assert len({row["question_id"] for row in rows}) == len(rows)
    assert all(len(row["contexts"]) == 10 for row in rows)
    assert all(sum(c["is_supporting"] for c in row["contexts"]) == 1 for row in rows)
    assert all(c["title"].strip() for row in rows for c in row["contexts"])


def test_the_readmes_set_is_what_its_builder_writes_from_the_copied_readmes(
        bench_scripts: Any) -> None:
    pytest.importorskip("langchain_text_splitters")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT / "benchmarks" / "data"))  # it imports qa_sets by name
        builder = bench_scripts.load("make_readmes",
                                     ROOT / "benchmarks" / "data" / "make_readmes_qa.py")
    built, _, _ = builder.rows()
    assert built == _rows("readmes")


def test_a_questions_part_depends_only_on_its_id(bench: ModuleType) -> None:
    assert bench.part("pydocs-000") == bench.part("pydocs-000")
    assert {bench.part(f"q{n}")[0] for n in range(50)} == {"dev", "aside"}


def test_passage_ranking_keeps_the_best_whole_and_cuts_the_next_to_fit(
        bench: ModuleType) -> None:
    q = bench.Question("q", "which river", "Rhine", (
        "Paris is on the Seine, a river in France. " * 3,
        "The Rhine is the river that flows through Basel and on to the sea.",
        "Nothing here is relevant at all, not one word of it."), (False, True, False))
    count = bench.estimate_tokens
    budget = count(q.paragraphs[1]) + 1 + 5
    kept = bench.rank_passages(q, [0.5, 1.0, 0.0], budget, count)
    assert kept.text.startswith(q.paragraphs[1])
    assert kept.paragraphs == {0, 1}
    assert count(kept.text) <= budget


def test_capsa_given_scores_packs_passages_carrying_the_retrievers_scores(
        bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    q = bench.Question("q", "which river", "Rhine", (
        "The Rhine flows through Basel.", "The Seine flows through Paris."), (True, False))
    seen: list[Any] = []
    real_pack = bench.pack

    def spy(query: str, passages: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(passages)
        return real_pack(query, passages, *args, **kwargs)

    monkeypatch.setattr(bench, "pack", spy)
    bench.capsa_method(True, scores=lambda question: [0.25, 0.75])(q, 40, bench.estimate_tokens)
    bench.capsa_method(True)(q, 40, bench.estimate_tokens)
    assert [p.score for p in seen[0]] == [0.25, 0.75]
    assert [p.score for p in seen[1]] == [None, None]


def test_a_run_reports_development_and_set_aside_parts_with_their_halves(
        bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    status = bench.main(["--dataset", "docstrings", "--limit", "12", "--no-embeddings",
                         "--no-scale", "--methods", "capsa,bm25-passages", "--tag", "smoke"])
    assert status == 0
    report = json.loads((tmp_path / "compression-docstrings-smoke.json").read_text("utf-8"))
    parts = report["parts"]
    assert set(parts) == {"dev", "dev-a", "dev-b", "aside"}
    assert parts["dev"]["questions"] + parts["aside"]["questions"] == 12
    assert parts["dev-a"]["questions"] + parts["dev-b"]["questions"] == parts["dev"]["questions"]
    assert set(parts["aside"]["methods"]) == {"capsa", "bm25-passages"}


_WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
_SENTENCES = st.lists(_WORDS, min_size=1, max_size=80).map(
    lambda words: " ".join([words[0].capitalize(), *words[1:]]) + ".")
_TEXTS = st.lists(st.lists(_SENTENCES, min_size=1, max_size=6).map(" ".join),
                  min_size=1, max_size=8).map("\n\n".join)


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_sentence_spans_cover_the_text_in_order_and_cut_only_at_sentence_ends(
        qa_sets: ModuleType, text: str) -> None:
    spans = qa_sets.sentence_spans(text)
    assert all(a < b and text[a:b] == text[a:b].strip() for a, b in spans)
    assert all(b <= c for (_, b), (c, _) in itertools.pairwise(spans))
    assert " ".join(text[a:b] for a, b in spans).split() == text.split()
    assert all(text[b - 1] == "." for _, b in spans)
    assert all(b - a <= qa_sets.SENTENCE_CHUNK_CHARS or text[a:b].count(".") == 1
               for a, b in spans)


def test_a_run_of_several_sets_with_titles_ends_with_every_part_side_by_side(
        bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "TITLES", False)  # main sets it; restored after the test
    status = bench.main(["--dataset", "docstrings,squad-open", "--limit", "6", "--no-embeddings",
                         "--no-scale", "--methods", "capsa,bm25-passages", "--titles",
                         "--tag", "smoke"])
    assert status == 0
    overview = json.loads((tmp_path / "compression-all-titles-smoke.json").read_text("utf-8"))
    assert set(overview["sets"]) == {"docstrings", "squad-open"}
    for parts in overview["sets"].values():
        assert set(parts) == {"dev", "aside"}
        assert sum(part["questions"] for part in parts.values()) == 6
        assert all(set(part["methods"]) == {"capsa", "bm25-passages"} for part in parts.values())
        assert all(len(row["retention"]) == 3 for part in parts.values()
                   for row in part["methods"].values())


def test_with_titles_a_passage_ranker_reads_each_paragraph_under_its_title(
        bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    q = bench.Question("q", "which river", "Rhine", ("It flows through Basel.", "Nothing."),
                       (True, False), ("Rhine", ""))
    monkeypatch.setattr(bench, "TITLES", True)
    titled = bench.titled(q)
    monkeypatch.setattr(bench, "TITLES", False)
    assert titled == ("Rhine\nIt flows through Basel.", "Nothing.")
    assert bench.titled(q) == q.paragraphs


@pytest.mark.parametrize("name", ["hotpot-single", "squad-open", "covid"])
def test_a_windows_set_is_its_source_recut_into_windows_of_eighty_words(
        bench_scripts: Any, name: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT / "benchmarks" / "data"))  # it imports qa_sets by name
        builder = bench_scripts.load("make_windows",
                                     ROOT / "benchmarks" / "data" / "make_windows_qa.py")
    sources = {row["question_id"]: row for row in _rows(name)}
    built = _rows(f"{name}-windows")
    assert {row["question_id"] for row in built} <= set(sources)
    for row in built:
        assert builder.recut(sources[row["question_id"]]) == row
        paragraphs = " ".join(" ".join(c["paragraph_text"].split())
                              for c in sources[row["question_id"]]["contexts"])
        for context in row["contexts"]:
            assert len(context["paragraph_text"].split()) <= builder.WORDS
            assert context["paragraph_text"] in paragraphs
