"""LlamaIndex ShadowRetriever: serve the baseline, compare any candidate off the request's path."""

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

from capsa.budget import Budget
from capsa.demo.routes import ROUTES, sample_passages
from capsa.llama_index import CapsaNodePostprocessor, ShadowRetriever
from capsa.llama_index.shadow import ShadowQueryEvent
from capsa.shadow import PairedDecision, ShadowReport

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
    """Collects ShadowQueryEvents from the instrumentation dispatcher."""

    seen: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "Outcomes"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, ShadowQueryEvent):
            self.seen.append(event)


@pytest.fixture
def rows() -> list[PairedDecision]:
    return []


@pytest.fixture
def make(rows: list[PairedDecision]) -> Iterator[Any]:
    """Build ShadowRetrievers sinking into `rows`; every one is closed after the test."""
    built: list[ShadowRetriever] = []

    def build(baseline: Any, candidate: Any, **options: Any) -> ShadowRetriever:
        shadow = ShadowRetriever(baseline, candidate, rows.extend, **options)
        built.append(shadow)
        return shadow

    yield build
    for shadow in built:
        shadow.close()


def _node(node_id: str, text: str, score: float = 0.5) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=text), score=score)


NODES = [
    _node("refund", "Refunds are accepted within 30 days of delivery."),
    _node("credit", "Store credit never expires and can be used online."),
    _node("ship", "Shipping costs are refunded only when an item arrived damaged, which the "
          "courier must confirm in writing. " * 6),
    _node("hours", "The support desk is open on weekdays from nine to five."),
]


def _packing_engine(max_tokens: int = 60) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(
        Fixed(NODES), llm=MockLLM(),
        node_postprocessors=[CapsaNodePostprocessor(budget=Budget(max_tokens=max_tokens))])


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


def test_shadow_serves_the_baseline_nodes_unchanged(make) -> None:
    baseline = RouteRetriever("lexical")
    shadow = make(baseline, RouteRetriever("budgeted"))
    for query in QUERIES:
        assert _ids(shadow.retrieve(query)) == _ids(baseline.retrieve(query))


def test_shadow_returns_before_the_candidate_has_run(make, rows, release) -> None:
    shadow = make(Fixed(NODES[:2]), Hanging(release))
    assert _ids(shadow.retrieve("refunds")) == ["refund", "credit"]
    assert rows == [] and shadow.counts.paired == 0
    release.set()
    shadow.flush(timeout_s=5)
    assert shadow.counts.paired == 1


def test_shadow_over_the_sample_corpus_reports_every_query(make, rows) -> None:
    shadow = make(RouteRetriever("lexical"), RouteRetriever("budgeted"))
    for query in QUERIES:
        shadow.retrieve(query)
    shadow.flush()
    report = ShadowReport.from_rows(rows, invalidated=shadow.counts.invalidated)
    assert (report.queries, report.invalidated) == (len(QUERIES), 0)
    assert report.selection_jaccard is not None and 0 < report.selection_jaccard < 1


def test_shadow_samples_queries_and_counts_the_rest(make) -> None:
    draws = iter([0.1, 0.9, 0.9])
    shadow = make(Fixed(NODES), Fixed(NODES), sample_rate=0.5, sampler=lambda: next(draws))
    for _ in range(3):
        shadow.retrieve("refunds")
    shadow.flush()
    assert (shadow.counts.paired, shadow.counts.sampled_out) == (1, 2)


async def test_shadow_async_path_serves_the_baseline_and_pairs(make, rows) -> None:
    shadow = make(RouteRetriever("lexical"), RouteRetriever("budgeted"))
    served = await shadow.aretrieve(QUERIES[0])
    assert _ids(served) == _ids(RouteRetriever("lexical").retrieve(QUERIES[0]))
    await shadow.aflush()
    assert shadow.counts.paired == 1 and rows


def test_shadow_counts_a_failing_candidate_and_still_serves(make, rows) -> None:
    shadow = make(Fixed(NODES), Failing())
    assert _ids(shadow.retrieve("refunds")) == _ids(NODES)
    shadow.flush()
    assert shadow.counts.candidate_raised == 1 and rows == []


async def test_shadow_async_counts_a_candidate_that_times_out(make, rows, release) -> None:
    shadow = make(Fixed(NODES), Hanging(release), timeout_s=0.05)
    assert _ids(await shadow.aretrieve("refunds")) == _ids(NODES)
    await shadow.aflush()
    assert shadow.counts.candidate_timed_out == 1


def test_shadow_refuses_a_node_without_a_score_when_node_scores_are_used(make, rows) -> None:
    node = NodeWithScore(node=TextNode(id_="x", text="Refunds within 30 days."), score=None)
    shadow = make(Fixed([node]), Fixed([node]), use_node_scores=True)
    assert shadow.retrieve("refunds") == [node]
    shadow.flush()
    assert shadow.counts.capture_refused == 1
    assert shadow.counts.refused == {"bad_score": 1}


def test_shadow_rejects_a_non_positive_timeout(rows) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        ShadowRetriever(Fixed([]), Fixed([]), rows.extend, timeout_s=0)


def test_shadow_hands_its_bound_on_abandoned_threads_to_the_recorder(make) -> None:
    shadow = make(Fixed([]), Fixed([]), max_abandoned_threads=3)
    assert shadow._recorder.max_abandoned_threads == 3


def test_shadow_refuses_a_negative_bound_on_abandoned_threads(rows) -> None:
    with pytest.raises(ValueError, match="max_abandoned_threads"):
        ShadowRetriever(Fixed([]), Fixed([]), rows.extend, max_abandoned_threads=-1)


def test_shadow_emits_an_instrumentation_event_per_query(make, outcomes) -> None:
    shadow = make(Fixed(NODES), Failing(), sample_rate=0.0)
    shadow.retrieve("refunds")
    (event,) = outcomes.seen
    assert event.compared is False
    assert shadow.counts.sampled_out == 1  # the totals stay with the operator


def test_shadow_event_carries_nothing_from_earlier_queries(make, outcomes) -> None:
    # Whoever sees one query's event must not learn how many rows the query before
    # it produced, as cumulative counts would tell.
    shadow = make(Fixed(NODES), Fixed(NODES[:1]))
    for query in ("refunds", "returns"):
        shadow.retrieve(query)
        shadow.flush()
    assert shadow.counts.paired == 2
    first, second = (e.model_dump(exclude={"id_", "timestamp", "span_id", "tags"})
                     for e in outcomes.seen)
    assert first == second


# --- any route: query engines with capsa's postprocessor ----------------------------


def test_shadow_captures_a_query_engine_packers_gate_and_order(make, rows) -> None:
    shadow = make(Fixed(NODES), _packing_engine())
    shadow.retrieve("refund window for a damaged item")
    shadow.flush()
    assert shadow.counts.paired == 1 and len(rows) == len(NODES)
    reasons = {r.candidate_gate_reason for r in rows}  # irrelevant drops: below_threshold
    assert "admitted" in reasons and reasons & {"over_budget", "below_threshold"}
    kept = [r for r in rows if r.candidate_admitted]
    assert sorted(r.candidate_rank for r in kept) == list(range(1, len(kept) + 1))
    assert all(r.candidate_included for r in kept)


async def test_shadow_async_captures_a_query_engine_packer(make, rows) -> None:
    shadow = make(Fixed(NODES), _packing_engine())
    await shadow.aretrieve("refund window for a damaged item")
    await shadow.aflush()
    assert {r.candidate_gate_reason for r in rows} & {"over_budget", "below_threshold"}


def test_shadow_serves_a_packing_query_engine_as_baseline(make, rows) -> None:
    baseline = _packing_engine()
    shadow = make(baseline, Fixed(NODES))
    served = shadow.retrieve("refund window")
    shadow.flush()
    assert sum(r.baseline_included for r in rows) == len(served)
    assert any(r.baseline_gate_reason in {"over_budget", "below_threshold"} for r in rows)


# --- visibility on the LLM's wire ---------------------------------------------------


def test_shadow_records_the_served_block_visible_in_a_query_engines_prompt(make, rows) -> None:
    shadow = make(Fixed(NODES[:2]), Fixed(NODES[1:3]), observe_wire=True)
    engine = RetrieverQueryEngine.from_args(shadow, llm=MockLLM())
    engine.query("How long do refunds take?")
    shadow.flush()
    assert {r.baseline_visible for r in rows if r.baseline_included} == {True}


def test_shadow_records_a_block_replaced_before_the_llm_as_not_visible(make, rows) -> None:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    class Replace(BaseNodePostprocessor):
        """Stands for a later step that swaps the served nodes for others."""

        def _postprocess_nodes(self, nodes: Any, query_bundle: Any = None) -> Any:
            return [_node("parking", "Visitors park behind the warehouse on level two.")]

    shadow = make(Fixed(NODES[:2]), Fixed(NODES[1:3]), observe_wire=True)
    engine = RetrieverQueryEngine.from_args(shadow, llm=MockLLM(),
                                            node_postprocessors=[Replace()])
    engine.query("How long do refunds take?")
    shadow.flush()
    assert shadow.counts.paired == 1
    assert {r.baseline_visible for r in rows if r.baseline_included} == {False}


def test_shadow_leaves_visibility_unknown_when_no_llm_call_follows(make, rows) -> None:
    shadow = make(Fixed(NODES[:2]), Fixed(NODES[1:3]), observe_wire=True)
    shadow.retrieve("How long do refunds take?")
    shadow.flush()
    assert {r.baseline_visible for r in rows} == {None}


def test_a_query_with_no_llm_call_releases_its_place_at_the_next_query(make, rows) -> None:
    # An app that retrieves, then prompts its own client: the wire never comes, and the
    # comparison held its place for wire_timeout_s (60 s), so later ones were dropped busy.
    answered = threading.Semaphore(0)

    class Signalling(Fixed):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            answered.release()
            return self.nodes

    shadow = make(Fixed(NODES[:2]), Signalling(NODES[1:3]), observe_wire=True, max_in_flight=2)
    for query in ("How long do refunds take?", "Does store credit expire?",
                  "Who pays return shipping?"):
        shadow.retrieve(query)
        assert answered.acquire(timeout=30)  # the candidate ran; its wire is all it waits for
    shadow.flush()
    assert shadow.counts.dropped_busy == 0 and shadow.counts.paired == 3
    assert {r.baseline_visible for r in rows} == {None}


def test_shadow_answers_a_query_engine_from_the_baseline_nodes(make) -> None:
    shadow = make(RouteRetriever("lexical"), RouteRetriever("budgeted"))
    engine = RetrieverQueryEngine.from_args(shadow, llm=MockLLM())
    query = "How much is the monthly internet stipend for remote workers?"
    response = engine.query(query)
    served = RouteRetriever("lexical").retrieve(query)
    assert [n.node.node_id for n in response.source_nodes] == _ids(served)
    assert "EUR 30" in str(response)
    shadow.flush()
    assert shadow.counts.paired == 1


# --- privacy: nothing released names a node, a passage or a query -----------------


def _leaked(rows: list[PairedDecision], ids: list[str], texts: list[str]) -> set[str]:
    blob = json.dumps([r.model_dump(mode="json") for r in rows]).lower()
    tokens = set(re.findall(r"[a-z0-9_]+", blob))
    words = {w for t in texts for w in re.findall(r"[a-z0-9_]+", t.lower()) if not w.isdigit()}
    return {i for i in ids if i.lower() in blob} | (words & tokens)


def test_shadow_rows_from_the_sample_corpus_carry_no_identity(make, rows) -> None:
    shadow = make(RouteRetriever("lexical"), RouteRetriever("budgeted"))
    for query in QUERIES:
        shadow.retrieve(query)
    shadow.flush()
    ids = [p.source_id for p in sample_passages()]
    assert rows and _leaked(rows, ids, [p.text for p in sample_passages()] + QUERIES) == set()


def test_shadow_rows_of_a_packing_engine_and_the_llm_wire_carry_no_identity(make,
                                                                           rows) -> None:
    shadow = make(_packing_engine(), Fixed(NODES), observe_wire=True)
    question = "How long do refunds take?"
    RetrieverQueryEngine.from_args(shadow, llm=MockLLM()).query(question)
    shadow.flush()
    assert shadow.counts.paired == 1
    assert any(r.baseline_visible for r in rows)  # the wire path was taken
    texts = [n.node.get_content() for n in NODES] + [question]
    assert _leaked(rows, [n.node.node_id for n in NODES], texts) == set()
