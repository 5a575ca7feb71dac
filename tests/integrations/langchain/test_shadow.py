"""LangChain ShadowRetriever: serve the baseline, compare any candidate off the request's path."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from importlib import resources
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import (
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    ConfigurableField,
    RunnableLambda,
    RunnablePassthrough,
)
from langchain_core.vectorstores import InMemoryVectorStore

from capsa.budget import Budget
from capsa.demo.corpus_source import DOCUMENTS
from capsa.demo.routes import ROUTES, sample_passages
from capsa.langchain import (
    BudgetedRetriever,
    CapsaCompressor,
    ShadowMiddleware,
    ShadowRetriever,
)
from capsa.shadow import PairedDecision, ShadowReport

_QUERY_LINES = resources.files("capsa.demo").joinpath("queries.jsonl").read_text("utf-8")
QUERIES = [json.loads(line)["query"] for line in _QUERY_LINES.splitlines() if line.strip()]


class LexicalRetriever(BaseRetriever):
    """The bundled lexical route as a LangChain retriever: selected passages, with scores."""

    route_name: str = "lexical"

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        run = ROUTES[self.route_name]().run(query)
        scores = {c.source_id: c.score for c in run.candidates}
        texts = {c.source_id: c.text for c in run.candidates}
        return [Document(id=s, page_content=texts[s], metadata={"score": scores[s]})
                for s in run.selected]


class Failing(BaseRetriever):
    """A candidate whose index is down."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise ConnectionError("candidate index unreachable")


class Hanging(BaseRetriever):
    """A candidate that never answers until the test releases it."""

    release: Any

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.release.wait()
        return []

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        await asyncio.Event().wait()
        return []


class Fixed(BaseRetriever):
    """Returns the same documents for every query."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.docs


class Events(BaseCallbackHandler):
    """Collects capsa custom events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


@pytest.fixture(scope="module")
def vector_retriever() -> BaseRetriever:
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=64))
    store.add_documents([Document(id=p.source_id, page_content=p.text)
                         for p in sample_passages()])
    return store.as_retriever(search_kwargs={"k": 3})


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def rows() -> list[PairedDecision]:
    return []


@pytest.fixture
def make(rows: list[PairedDecision]) -> Iterator[Any]:
    """Build ShadowRetrievers sinking into `rows`; every one is closed after the test."""
    built: list[ShadowRetriever] = []

    def build(baseline: Any, candidate: Any, **options: Any) -> ShadowRetriever:
        shadow = ShadowRetriever(baseline=baseline, candidate=candidate, sink=rows.extend,
                                 **options)
        built.append(shadow)
        return shadow

    yield build
    for shadow in built:
        shadow.close()


DOCS = [
    Document(id="refund", page_content="Refunds are accepted within 30 days of delivery."),
    Document(id="credit", page_content="Store credit never expires and can be used online."),
    Document(id="ship", page_content="Shipping costs are refunded only when an item arrived "
             "damaged, which the courier must confirm in writing. " * 6),
    Document(id="hours", page_content="The support desk is open on weekdays from nine to five."),
]


def test_shadow_serves_the_baseline_documents_unchanged(vector_retriever, make) -> None:
    baseline = LexicalRetriever()
    shadow = make(baseline, vector_retriever)
    for query in QUERIES:
        assert shadow.invoke(query) == baseline.invoke(query)


def test_shadow_returns_before_the_candidate_has_run(make, rows, release) -> None:
    started = threading.Event()

    def slow(query: str) -> list[Document]:
        started.set()
        release.wait()
        return DOCS[:1]

    shadow = make(Fixed(docs=DOCS[:2]), RunnableLambda(slow))
    assert shadow.invoke("refunds") == DOCS[:2]
    assert started.wait(5) and rows == []  # served while the candidate still runs
    release.set()
    shadow.flush(timeout_s=5)
    assert shadow.counts.paired == 1 and len(rows) == 2


def test_shadow_over_the_sample_corpus_reports_every_query(vector_retriever, make, rows) -> None:
    shadow = make(LexicalRetriever(), vector_retriever)
    for query in QUERIES:
        shadow.invoke(query)
    shadow.flush()
    report = ShadowReport.from_rows(rows, invalidated=shadow.counts.invalidated)
    assert (report.queries, report.invalidated) == (len(QUERIES), 0)
    assert shadow.counts.paired == len(QUERIES) and shadow.counts.rows == len(rows)
    # a hash embedding and BM25 rarely agree: the report must show disagreement
    assert report.recall_of_baseline is not None and report.recall_of_baseline < 0.5


def test_shadow_samples_queries_and_counts_the_rest(make, rows) -> None:
    draws = iter([0.1, 0.9, 0.2, 0.8])
    shadow = make(Fixed(docs=DOCS[:1]), Fixed(docs=DOCS[:1]), sample_rate=0.5,
                  sampler=lambda: next(draws))
    for _ in range(4):
        assert shadow.invoke("refunds") == DOCS[:1]
    shadow.flush()
    assert (shadow.counts.paired, shadow.counts.sampled_out) == (2, 2)


def test_shadow_drops_and_counts_queries_beyond_the_bound_in_flight(make, release) -> None:
    shadow = make(Fixed(docs=DOCS[:1]), Hanging(release=release), max_in_flight=1)
    assert shadow.invoke("refunds") == DOCS[:1]
    assert shadow.invoke("refunds") == DOCS[:1]
    assert shadow.counts.dropped_busy == 1
    release.set()


async def test_shadow_async_path_serves_the_baseline_and_pairs(vector_retriever, make,
                                                               rows) -> None:
    baseline = LexicalRetriever()
    shadow = make(baseline, vector_retriever)
    served = await shadow.ainvoke(QUERIES[0])
    assert served == await baseline.ainvoke(QUERIES[0])
    await shadow.aflush()
    assert shadow.counts.paired == 1 and rows


def test_shadow_counts_a_failing_candidate_and_still_serves(make, rows) -> None:
    shadow = make(LexicalRetriever(), Failing())
    assert shadow.invoke(QUERIES[0]) == LexicalRetriever().invoke(QUERIES[0])
    shadow.flush()
    assert shadow.counts.candidate_raised == 1 and rows == []


async def test_shadow_async_counts_a_candidate_that_times_out(make, rows, release) -> None:
    shadow = make(LexicalRetriever(), Hanging(release=release), timeout_s=0.05)
    assert await shadow.ainvoke(QUERIES[0]) == LexicalRetriever().invoke(QUERIES[0])
    await shadow.aflush()
    assert shadow.counts.candidate_timed_out == 1 and rows == []


def test_shadow_hands_its_bound_on_abandoned_threads_to_the_recorder(make) -> None:
    shadow = make(Fixed(docs=[]), Fixed(docs=[]), max_abandoned_threads=3)
    assert shadow.recorder.max_abandoned_threads == 3


def test_shadow_refuses_a_negative_bound_on_abandoned_threads(rows) -> None:
    with pytest.raises(ValueError, match="max_abandoned_threads"):
        ShadowRetriever(baseline=Fixed(docs=[]), candidate=Fixed(docs=[]), sink=rows.extend,
                        max_abandoned_threads=-1)


def test_shadow_propagates_the_baselines_own_failure_and_frees_its_place(
        make, vector_retriever) -> None:
    shadow = make(Failing(), vector_retriever, max_in_flight=1)
    with pytest.raises(ConnectionError):
        shadow.invoke(QUERIES[0])
    assert shadow.recorder.in_flight == 0


def test_shadow_counts_a_candidate_returning_one_document_twice(make, rows) -> None:
    doc = DOCS[0]
    shadow = make(Fixed(docs=[doc]), Fixed(docs=[doc, doc]))
    assert shadow.invoke("refunds") == [doc]
    shadow.flush()
    assert shadow.counts.capture_refused == 1 and rows == []


def test_shadow_identifies_documents_without_an_id_by_their_content(make, rows) -> None:
    a = Document(page_content="Refunds within 30 days.")
    b = Document(page_content="Store credit never expires.")
    shadow = make(Fixed(docs=[a, b]), Fixed(docs=[b]))
    shadow.invoke("refunds")
    shadow.flush()
    assert sorted((r.baseline_selected, r.candidate_selected) for r in rows) == [
        (True, False), (True, True)]


def test_shadow_uses_metadata_scores_when_a_key_is_given(make, rows) -> None:
    docs = [Document(id="a", page_content="Refunds within 30 days.", metadata={"s": 0.25}),
            Document(id="b", page_content="Store credit never expires.", metadata={"s": 0.75})]
    shadow = make(Fixed(docs=docs), Fixed(docs=docs), score_key="s")
    shadow.invoke("refunds")
    shadow.flush()
    assert sorted(r.baseline_score for r in rows if r.baseline_score is not None) == [0.25, 0.75]


def test_shadow_forwards_invoke_kwargs_to_both_retrievers(make, rows, vector_retriever) -> None:
    shadow = make(vector_retriever, vector_retriever)
    assert len(shadow.invoke(QUERIES[0], k=1)) == 1
    shadow.flush()
    assert len(rows) == 1


# --- any route, the caller's whole config -------------------------------------------


def test_shadow_accepts_runnable_lambdas_on_both_sides(make, rows) -> None:
    shadow = make(RunnableLambda(lambda q: DOCS[:2]), RunnableLambda(lambda q: DOCS[1:3]))
    assert shadow.invoke("refunds") == DOCS[:2]
    shadow.flush()
    assert sorted((r.baseline_selected, r.candidate_selected) for r in rows) == [
        (False, True), (True, False), (True, True)]


def test_shadow_passes_configurable_fields_to_both_routes(make, rows) -> None:
    tenants = {"acme": DOCS[:1], "globex": DOCS[3:]}

    class Tenanted(BaseRetriever):
        tenant: str = "acme"

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return tenants[self.tenant]

    routed = Tenanted().configurable_fields(tenant=ConfigurableField(id="tenant"))
    shadow = make(routed, routed)
    served = shadow.invoke("refunds", {"configurable": {"tenant": "globex"}})
    shadow.flush()
    assert served == tenants["globex"]
    assert len(rows) == 1 and rows[0].baseline_selected and rows[0].candidate_selected


@pytest.mark.parametrize("traced", [False, True])
def test_shadow_passes_tags_and_metadata_to_both_routes_callbacks_to_the_traced(
        make, traced: bool) -> None:
    seen: list[tuple[str, tuple[str, ...], dict[str, Any]]] = []

    class Spy(BaseCallbackHandler):
        def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID,
                               tags: list[str] | None = None,
                               metadata: dict[str, Any] | None = None, **kw: Any) -> None:
            seen.append((kw.get("name") or "", tuple(tags or ()), dict(metadata or {})))

    metadata: list[dict[str, Any]] = []

    class Tenanted(BaseRetriever):
        def _get_relevant_documents(self, query: str, *,
                                    run_manager: CallbackManagerForRetrieverRun
                                    ) -> list[Document]:
            metadata.append(dict(run_manager.metadata))
            return DOCS[1:2]

    shadow = make(Fixed(docs=DOCS[:1]), Tenanted(), trace_candidate=traced)
    shadow.invoke("refunds", {"tags": ["team-a"], "metadata": {"tenant": "acme"},
                              "callbacks": [Spy()]})
    shadow.flush()
    sides = [entry for entry in seen if "shadow_baseline" in entry[1]
             or "shadow_candidate" in entry[1]]
    assert [("shadow_candidate" in tags) for _, tags, _ in sides] == [False, True][:1 + traced]
    assert all("team-a" in tags and meta.get("tenant") == "acme" for _, tags, meta in sides)
    assert metadata and metadata[0].get("tenant") == "acme"  # the candidate gets it anyway


async def test_an_event_stream_shows_the_served_documents_only(make) -> None:
    """A UI that shows the last retriever's documents as the answer's sources."""
    import asyncio

    from langchain_core.runnables import RunnableLambda

    async def answer(documents: list[Document]) -> str:
        await asyncio.sleep(0.2)  # the model: the candidate has long finished meanwhile
        return "ok"

    shadow = make(Fixed(docs=DOCS[:1]), Fixed(docs=DOCS[1:2]))
    chain = shadow | RunnableLambda(answer)
    ended = [event["data"]["output"] async for event in chain.astream_events(
        "refunds", version="v2") if event["event"] == "on_retriever_end"]
    await shadow.aflush()
    assert shadow.counts.paired == 1
    assert ended and all(out == DOCS[:1] for out in ended)


# --- the whole capture of capsa's own routes ---------------------------------------


def _budgeted(max_tokens: int = 45) -> BudgetedRetriever:
    return BudgetedRetriever(retriever=Fixed(docs=DOCS), budget=Budget(max_tokens=max_tokens))


def test_shadow_captures_a_budgeted_retrievers_gate_and_packed_order(make, rows) -> None:
    shadow = make(Fixed(docs=DOCS), _budgeted())
    shadow.invoke("refund window for a damaged item")
    shadow.flush()
    assert shadow.counts.paired == 1 and len(rows) == len(DOCS)
    assert all(r.baseline_gate_reason == "admitted" for r in rows)
    reasons = sorted(str(r.candidate_gate_reason) for r in rows)
    assert "over_budget" in reasons and "admitted" in reasons
    kept = [r for r in rows if r.candidate_admitted]
    assert sorted(r.candidate_rank for r in kept) == list(range(1, len(kept) + 1))
    assert all(r.candidate_selected and r.candidate_included for r in kept)
    assert not any(r.candidate_selected for r in rows if not r.candidate_admitted)


async def test_shadow_async_captures_a_budgeted_retrievers_gate(make, rows) -> None:
    shadow = make(Fixed(docs=DOCS), _budgeted())
    await shadow.ainvoke("refund window for a damaged item")
    await shadow.aflush()
    assert shadow.counts.paired == 1
    assert {r.candidate_gate_reason for r in rows} >= {"admitted", "over_budget"}


def test_shadow_captures_a_budgeted_baseline_as_served(make, rows) -> None:
    baseline = _budgeted()
    shadow = make(baseline, Fixed(docs=DOCS))
    served = shadow.invoke("refund window")
    assert served == baseline.invoke("refund window")
    shadow.flush()
    assert sorted(r.baseline_gate_reason for r in rows if not r.baseline_admitted)
    assert sum(r.baseline_included for r in rows) == len(served)


def test_shadow_captures_a_compressor_inside_a_compression_retriever(make, rows) -> None:
    classic = pytest.importorskip("langchain_classic.retrievers")
    candidate = classic.ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=45)),
        base_retriever=Fixed(docs=DOCS))
    shadow = make(Fixed(docs=DOCS), candidate)
    shadow.invoke("refund window for a damaged item")
    shadow.flush()
    assert shadow.counts.paired == 1
    assert "over_budget" in {r.candidate_gate_reason for r in rows}


def test_shadow_refuses_a_packed_route_changed_after_packing(make, rows) -> None:
    reordered = _budgeted(400) | RunnableLambda(lambda docs: list(reversed(docs)))
    shadow = make(Fixed(docs=DOCS), reordered)
    shadow.invoke("refund window")
    shadow.flush()
    assert shadow.counts.capture_refused == 1 and rows == []
    assert shadow.counts.refused == {"packing_mismatch": 1}


def test_shadow_reports_each_query_as_a_custom_event(make) -> None:
    handler = Events()
    shadow = make(LexicalRetriever(), Failing(), sample_rate=0.0)
    shadow.invoke(QUERIES[0], config={"callbacks": [handler]})
    (data,) = [d for name, d in handler.events if name == "capsa.shadow"]
    assert data == {"compared": False}
    assert shadow.counts.sampled_out == 1  # the totals stay with the operator


def test_shadow_event_carries_nothing_from_earlier_queries(make) -> None:
    # Whoever sees one query's event (its trace, its stream) must not learn how many
    # rows the query before it produced, as cumulative counts would tell.
    shadow = make(LexicalRetriever(), LexicalRetriever(route_name="budgeted"))
    seen = []
    for query in QUERIES[:2]:
        handler = Events()
        shadow.invoke(query, config={"callbacks": [handler]})
        shadow.flush()
        seen += [d for name, d in handler.events if name == "capsa.shadow"]
    assert shadow.counts.paired == 2
    assert seen[0] == seen[1] == {"compared": True}


def test_shadow_serves_a_chain_with_the_baseline_context(vector_retriever, make) -> None:
    shadow = make(LexicalRetriever(), vector_retriever)
    prompt = ChatPromptTemplate.from_messages([("human", "Context:\n{context}\n\nQ: {question}")])
    chain = (
        {"context": shadow | (lambda docs: "\n\n".join(d.page_content for d in docs)),
         "question": RunnablePassthrough()}
        | prompt | ParrotFakeChatModel() | StrOutputParser()
    )
    query = "How much is the monthly internet stipend for remote workers?"
    answer = chain.invoke(query)
    assert "EUR 30" in answer
    shadow.flush()
    assert shadow.counts.paired == 1


# --- visibility on an agent's wire -------------------------------------------------


class _ToolModel(GenericFakeChatModel):
    """Plays scripted replies; binding tools is a no-op."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _agent(shadow: ShadowRetriever, *, trim: bool = False) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import create_retriever_tool
    from langgraph.checkpoint.memory import InMemorySaver

    class DropToolOutput(AgentMiddleware):
        """Stands for a context editor that removes tool output before the model sees it."""

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            kept = [m for m in request.messages if not isinstance(m, ToolMessage)]
            return handler(request.override(messages=kept))

    tool = create_retriever_tool(shadow, "search", "Search the handbook.")
    script = iter([
        AIMessage("", tool_calls=[{"name": "search", "args": {"query": "refund window"},
                                   "id": "call-1"}]),
        AIMessage("Within 30 days."),
    ])
    # ShadowMiddleware sits innermost so it sees exactly what reaches the model.
    middleware = [*([DropToolOutput()] if trim else []), ShadowMiddleware(shadow)]
    return create_agent(_ToolModel(messages=script), tools=[tool], middleware=middleware,
                        checkpointer=InMemorySaver())


def test_shadow_middleware_records_the_served_block_as_visible(make, rows) -> None:
    from langchain_core.messages import HumanMessage

    shadow = make(Fixed(docs=DOCS[:2]), Fixed(docs=DOCS[1:3]))
    _agent(shadow).invoke({"messages": [HumanMessage("How long do refunds take?")]},
                          {"configurable": {"thread_id": "t-1"}})
    shadow.flush()
    assert shadow.counts.paired == 1
    assert {r.baseline_visible for r in rows if r.baseline_included} == {True}
    assert {r.baseline_visible for r in rows if not r.baseline_included} == {False}


def test_shadow_middleware_records_a_block_removed_before_the_model_as_not_visible(
        make, rows) -> None:
    from langchain_core.messages import HumanMessage

    shadow = make(Fixed(docs=DOCS[:2]), Fixed(docs=DOCS[1:3]))
    _agent(shadow, trim=True).invoke({"messages": [HumanMessage("How long do refunds take?")]},
                                     {"configurable": {"thread_id": "t-2"}})
    shadow.flush()
    assert shadow.counts.paired == 1
    assert {r.baseline_visible for r in rows if r.baseline_included} == {False}


# --- privacy: nothing released names a document, a passage or a query ------------


def _leaked(rows: list[PairedDecision], ids: list[str], texts: list[str]) -> set[str]:
    blob = json.dumps([r.model_dump(mode="json") for r in rows]).lower()
    tokens = set(re.findall(r"[a-z0-9_]+", blob))
    words = {w for t in texts for w in re.findall(r"[a-z0-9_]+", t.lower()) if not w.isdigit()}
    return {i for i in ids if i.lower() in blob} | (words & tokens)


def test_shadow_rows_from_the_sample_corpus_carry_no_identity(vector_retriever, make,
                                                              rows) -> None:
    shadow = make(LexicalRetriever(), vector_retriever)
    for query in QUERIES:
        shadow.invoke(query)
    shadow.flush()
    ids = [p.source_id for p in sample_passages()] + [d.name for d in DOCUMENTS]
    assert rows and _leaked(rows, ids, [p.text for p in sample_passages()] + QUERIES) == set()


def test_shadow_rows_of_a_packed_route_and_the_agent_wire_carry_no_identity(make, rows) -> None:
    from langchain_core.messages import HumanMessage

    shadow = make(_budgeted(), Fixed(docs=DOCS))
    question = "How long do refunds take?"
    _agent(shadow).invoke({"messages": [HumanMessage(question)]},
                          {"configurable": {"thread_id": "privacy"}})
    shadow.invoke("refund window for a damaged item")
    shadow.flush()
    assert shadow.counts.paired == 2
    assert any(r.baseline_visible is not None for r in rows)  # the wire path was taken
    texts = [d.page_content for d in DOCS] + [question, "refund window for a damaged item",
                                              "refund window"]
    assert _leaked(rows, [str(d.id) for d in DOCS], texts) == set()
