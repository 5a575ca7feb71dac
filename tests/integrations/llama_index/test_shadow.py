"""LlamaIndex ShadowRetriever over the sample corpus: serve the baseline, observe the candidate."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from capsa.llama_index import ShadowRetriever
from capsa.llama_index.shadow import ShadowOutcomeEvent
from capsa.shadow import PairedDecision, ShadowReport
from capsa.shadow.routes import ROUTES, sample_passages

_QUERY_LINES = resources.files("capsa.demo").joinpath("queries.jsonl").read_text("utf-8")
QUERIES = [json.loads(line)["query"] for line in _QUERY_LINES.splitlines() if line.strip()]


class RouteRetriever(BaseRetriever):
    """A bundled route as a LlamaIndex retriever: selected passages with their scores."""

    def __init__(self, route_name: str) -> None:
        super().__init__()
        self.route = ROUTES[route_name]()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        run = self.route.run(query_bundle.query_str)
        by_id = {c.source_id: c for c in run.candidates}
        return [NodeWithScore(node=TextNode(id_=s, text=by_id[s].text), score=by_id[s].score)
                for s in run.selected]


class Failing(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise ConnectionError("candidate index unreachable")


class Hanging(BaseRetriever):
    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.release.wait()
        return []

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await asyncio.Event().wait()
        return []


class Fixed(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes


class Outcomes(BaseEventHandler):
    """Collects ShadowOutcomeEvents from the instrumentation dispatcher."""

    seen: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "Outcomes"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, ShadowOutcomeEvent):
            self.seen.append(event)


@pytest.fixture
def rows() -> list[PairedDecision]:
    return []


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    handler = Outcomes(seen=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


def _ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def test_shadow_serves_the_baseline_nodes_unchanged(rows) -> None:
    baseline = RouteRetriever("lexical")
    shadow = ShadowRetriever(baseline, RouteRetriever("budgeted"), rows.extend)
    for query in QUERIES:
        served = shadow.retrieve(query)
        expected = baseline.retrieve(query)
        assert _ids(served) == _ids(expected)
        assert [n.score for n in served] == [n.score for n in expected]


def test_shadow_over_the_sample_corpus_reports_every_query(rows) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), RouteRetriever("budgeted"),
                             rows.extend, use_node_scores=True)
    for query in QUERIES:
        shadow.retrieve(query)
    report = ShadowReport.from_rows(rows, invalidated=shadow.counts.invalidated)
    assert (report.queries, report.invalidated) == (len(QUERIES), 0)
    assert report.selection_jaccard is not None and 0.0 < report.selection_jaccard < 1.0


def test_shadow_rows_from_the_sample_corpus_carry_no_identity(rows) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), RouteRetriever("budgeted"),
                             rows.extend)
    for query in QUERIES:
        shadow.retrieve(query)
    blob = json.dumps([r.model_dump(mode="json") for r in rows]).lower()
    assert not [p.source_id for p in sample_passages() if p.source_id.lower() in blob]
    tokens = set(re.findall(r"[a-z0-9_]+", blob))
    words = {w for t in [p.text for p in sample_passages()] + QUERIES
             for w in re.findall(r"[a-z0-9_]+", t.lower()) if not w.isdigit()}
    assert words & tokens == set()


async def test_shadow_async_path_serves_the_baseline_and_pairs(rows) -> None:
    baseline = RouteRetriever("lexical")
    shadow = ShadowRetriever(baseline, RouteRetriever("budgeted"), rows.extend)
    served = await shadow.aretrieve(QUERIES[0])
    assert _ids(served) == _ids(baseline.retrieve(QUERIES[0]))
    assert shadow.counts.paired == 1 and rows


def test_shadow_counts_a_failing_candidate_and_still_serves(rows) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), Failing(), rows.extend)
    assert _ids(shadow.retrieve(QUERIES[0])) == _ids(RouteRetriever("lexical").retrieve(QUERIES[0]))
    assert shadow.counts.candidate_raised == 1 and rows == []


async def test_shadow_async_counts_a_failing_candidate_and_still_serves(rows) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), Failing(), rows.extend)
    served = await shadow.aretrieve(QUERIES[0])
    assert _ids(served) == _ids(RouteRetriever("lexical").retrieve(QUERIES[0]))
    assert shadow.counts.candidate_raised == 1


def test_shadow_counts_a_candidate_that_times_out(rows, release) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), Hanging(release), rows.extend,
                             timeout_s=0.05)
    assert _ids(shadow.retrieve(QUERIES[0])) == _ids(RouteRetriever("lexical").retrieve(QUERIES[0]))
    assert shadow.counts.candidate_timed_out == 1 and rows == []


async def test_shadow_async_counts_a_candidate_that_times_out(rows, release) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), Hanging(release), rows.extend,
                             timeout_s=0.05)
    served = await shadow.aretrieve(QUERIES[0])
    assert _ids(served) == _ids(RouteRetriever("lexical").retrieve(QUERIES[0]))
    assert shadow.counts.candidate_timed_out == 1


def test_shadow_refuses_a_node_without_a_score_when_node_scores_are_used(rows) -> None:
    nodes = [NodeWithScore(node=TextNode(id_="a", text="Refunds within 30 days."), score=None)]
    shadow = ShadowRetriever(Fixed(nodes), Fixed(nodes), rows.extend, use_node_scores=True)
    assert _ids(shadow.retrieve("refunds")) == ["a"]
    assert shadow.counts.capture_refused == 1


def test_shadow_refuses_a_node_score_outside_zero_to_one(rows) -> None:
    nodes = [NodeWithScore(node=TextNode(id_="a", text="Refunds within 30 days."), score=7.5)]
    shadow = ShadowRetriever(Fixed(nodes), Fixed(nodes), rows.extend, use_node_scores=True)
    shadow.retrieve("refunds")
    assert shadow.counts.capture_refused == 1


def test_shadow_rejects_a_non_positive_timeout(rows) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        ShadowRetriever(Fixed([]), Fixed([]), rows.extend, timeout_s=0)


def test_shadow_emits_an_instrumentation_event_per_query(rows, outcomes) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), Failing(), rows.extend)
    shadow.retrieve(QUERIES[0])
    (event,) = outcomes.seen
    assert event.outcome == "candidate_raised" and event.counts["candidate_raised"] == 1


def test_shadow_answers_a_query_engine_from_the_baseline_nodes(rows) -> None:
    shadow = ShadowRetriever(RouteRetriever("lexical"), RouteRetriever("budgeted"),
                             rows.extend)
    engine = RetrieverQueryEngine.from_args(shadow, llm=MockLLM())
    query = "How much is the monthly internet stipend for remote workers?"
    response = engine.query(query)
    served = RouteRetriever("lexical").retrieve(query)
    assert [n.node.node_id for n in response.source_nodes] == _ids(served)
    assert "EUR 30" in str(response)
    assert shadow.counts.paired == 1
