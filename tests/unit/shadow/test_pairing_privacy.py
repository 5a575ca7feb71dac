"""The privacy promise of `pair`: released rows carry no source id, title, passage word or query.

Each test serialises the rows exactly as a sink would ship them and searches
the result. Source ids, file names and titles are searched as substrings.
Words are searched as whole tokens of the serialisation (runs of letters,
digits and underscores), because the serialisation has a vocabulary of its own
(field names such as ``baseline_score``, gate reasons, ``true``/``false``/
``null``, 32-digit hex ids, decimal scores): a passage word is a leak when it
appears as a token, not when it is a fragment of ``baseline_score``. Words made
only of digits are skipped: rows are numbers by contract, so the digits of a
score cannot be told from a number in a passage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.demo.corpus_source import DOCUMENTS, QUESTIONS
from capsa.demo.routes import ROUTES, compare_routes, sample_passages
from capsa.shadow import Candidate, PairedDecision, capture_retrieved, pair

_TOKEN = re.compile(r"[a-z0-9_]+")
_SCHEMA_WORDS = {"true", "false", "null", "admitted", "below_threshold", "over_budget",
                 "filtered", "duplicate"}


def _serialise(rows: Sequence[PairedDecision]) -> str:
    return json.dumps([row.model_dump(mode="json") for row in rows]).lower()


def _words(texts: Iterable[str]) -> set[str]:
    words = {w for text in texts for w in _TOKEN.findall(text.lower())}
    return {w for w in words if not w.isdigit()}


def _leaks(blob: str, ids: Iterable[str], texts: Iterable[str]) -> set[str]:
    tokens = set(_TOKEN.findall(blob))
    leaked = {i for i in ids if i.lower() in blob}
    return leaked | (_words(texts) & tokens)


def test_rows_from_the_sample_corpus_leak_no_id_title_passage_word_or_query() -> None:
    queries = [q.question for q in QUESTIONS]
    run = compare_routes(queries, ROUTES["lexical"](), ROUTES["budgeted"]())
    assert run.rows, "the routes must have produced rows to search"
    blob = _serialise(run.rows)
    passages = sample_passages()
    ids = [p.source_id for p in passages] + [d.name for d in DOCUMENTS]
    texts = [p.text for p in passages] + [d.title for d in DOCUMENTS] + queries
    assert _leaks(blob, ids, texts) == set()


def test_every_string_a_row_carries_is_a_fresh_id_or_a_gate_reason() -> None:
    run = compare_routes([QUESTIONS[0].question], ROUTES["lexical"](), ROUTES["lexical"]())
    strings = {v for row in run.rows for v in row.model_dump().values() if isinstance(v, str)}
    ids = {v for v in strings if re.fullmatch(r"[0-9a-f]{32}", v)}
    assert strings - ids <= _SCHEMA_WORDS
    assert len(ids) == len(run.rows) + 1


def test_the_privacy_search_does_find_a_leak_when_one_is_planted() -> None:
    run = compare_routes([QUESTIONS[0].question], ROUTES["lexical"](), ROUTES["lexical"]())
    planted = _serialise(run.rows) + json.dumps({"title": "Travel and Expense Policy",
                                                 "source": "travel-policy.pdf#2"}).lower()
    leaks = _leaks(planted, ["travel-policy.pdf#2"], ["Travel and Expense Policy"])
    assert leaks == {"travel-policy.pdf#2", "travel", "and", "expense", "policy"}


_word = st.from_regex(r"[a-z]{3,10}", fullmatch=True).filter(lambda w: w not in _SCHEMA_WORDS)


@st.composite
def _retrievals(draw: st.DrawFn) -> tuple[list[Candidate], list[Candidate], str]:
    ids = draw(st.lists(st.from_regex(r"[a-z]{2,6}-[a-z]{2,6}\.(pdf|md)#[a-z]{1,3}",
                                      fullmatch=True), min_size=1, max_size=8, unique=True))
    texts = draw(st.lists(st.lists(_word, min_size=2, max_size=8).map(" ".join),
                          min_size=len(ids), max_size=len(ids), unique=True))
    texts = [f"[{i}] {t}" for i, t in enumerate(texts)]
    docs = [Candidate(source_id=s, score=1.0 - n / len(ids), text=t)
            for n, (s, t) in enumerate(zip(ids, texts, strict=True))]
    candidate_docs = draw(st.permutations(docs)).copy()[: draw(st.integers(0, len(docs)))]
    query = " ".join(draw(st.lists(_word, min_size=1, max_size=6)))
    return docs, candidate_docs, query


@settings(max_examples=60, deadline=None)
@given(_retrievals())
def test_rows_from_random_retrievals_leak_no_id_passage_word_or_query(
    retrievals: tuple[list[Candidate], list[Candidate], str],
) -> None:
    baseline_docs, candidate_docs, query = retrievals
    rows = pair(capture_retrieved("baseline", query, baseline_docs),
                capture_retrieved("candidate", query, candidate_docs))
    blob = _serialise(rows)
    ids = [d.source_id for d in baseline_docs]
    texts = [d.text for d in baseline_docs] + [query]
    assert _leaks(blob, ids, texts) == set()


def test_rows_and_the_reports_queries_come_in_random_not_query_order() -> None:
    """Anyone holding the queries file could otherwise map each group of rows to a query."""
    from capsa.shadow import ShadowReport

    queries = [q.question for q in QUESTIONS]
    run = compare_routes(queries, ROUTES["lexical"](), ROUTES["budgeted"]())
    assert [r.row_id for r in run.rows] == sorted(r.row_id for r in run.rows)
    report = ShadowReport.from_rows(run.rows)
    ids = [q.query_id for q in report.per_query]
    assert ids == sorted(ids) and len(ids) == len(queries)


class _Raising:
    name = "raising"

    def __init__(self, route: object, bad: str) -> None:
        self.route, self.bad = route, bad

    def run(self, query: str):  # type: ignore[no-untyped-def]
        if query == self.bad:
            raise RuntimeError(f"index unavailable for {query!r}")
        return self.route.run(query)  # type: ignore[attr-defined]


def test_a_route_that_raises_loses_its_query_not_the_run() -> None:
    queries = [q.question for q in QUESTIONS[:4]]
    candidate = _Raising(ROUTES["budgeted"](), queries[1])
    run = compare_routes(queries, ROUTES["lexical"](), candidate)  # type: ignore[arg-type]
    assert run.causes == {"other": 1} and run.invalidated == 1
    assert len({r.query_id for r in run.rows}) == 3
