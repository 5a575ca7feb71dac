"""Shadow evaluation the way applications use it, in LangChain 1.x and LlamaIndex 0.14.

Both routes run over one set of real chunks (`RecursiveCharacterTextSplitter`,
`SentenceSplitter`); routes return duplicates, nothing, copies under other
ids, missing and NumPy scores; requests come from threads, `abatch`, and
`asyncio.run` per call; the served documents are edited in place afterwards,
as postprocessors and prompt code do; a candidate reranks with an LLM. Each
test checks a promise: the served answer is the baseline's, unchanged and
never waiting; every comparison is paired or counted; the rows are figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever as LCRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever as LIRetriever
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms.mock import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.postprocessor import LLMRerank
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from capsa.langchain import ShadowRetriever as LCShadow
from capsa.llama_index import ShadowRetriever as LIShadow
from capsa.shadow import PairedDecision, ShadowReport

QUERY = "How long do customers have to ask for a refund?"
POLICY = (
    "Refunds are accepted within 30 days of delivery. The item must be unused and in its "
    "original packaging. Shipping costs are refunded only when the parcel arrived damaged.\n\n"
    "Store credit never expires and can be spent online or in any shop. Gift cards cannot "
    "be exchanged for cash.\n\n"
    "The returns desk is open on weekdays from nine to five. Parcels sent to the desk need "
    "the order number written on the label."
)
SECRET_WORDS = ("Refunds", "refund", "parcel", "desk", "credit", "customers", "policy.md")


def _close(shadow: LCShadow | LIShadow) -> None:
    """Close, unless comparisons were leaked for good (then `close` would never return)."""
    with contextlib.suppress(TimeoutError):
        shadow.flush(timeout_s=10)
    if shadow._recorder.in_flight == 0:
        shadow.close()


def _leaks(rows: list[PairedDecision], ids: list[str]) -> list[str]:
    text = "".join(r.model_dump_json() for r in rows)
    return [w for w in (*SECRET_WORDS, *ids) if w in text]


@pytest.fixture
def rows() -> list[PairedDecision]:
    return []


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


# --- LangChain ----------------------------------------------------------------------


@pytest.fixture
def lc_make(rows: list[PairedDecision]) -> Iterator[Any]:
    built: list[LCShadow] = []

    def build(baseline: Any, candidate: Any, **options: Any) -> LCShadow:
        shadow = LCShadow(baseline=baseline, candidate=candidate, sink=rows.extend, **options)
        built.append(shadow)
        return shadow

    yield build
    for shadow in built:
        _close(shadow)


def _lc_chunks() -> list[Document]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=120, chunk_overlap=40)
    source = Document(page_content=POLICY, metadata={"source": "policy.md"})
    return splitter.split_documents([source, source.model_copy()])  # a file and its copy


class SyncOnly(LCRetriever):
    """A retriever with only a blocking path, as most custom and community ones are."""

    docs: list[Document]
    threads: list[str] = []
    release: Any = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.threads.append(threading.current_thread().name)
        if self.release is not None:
            self.release.wait()
        return list(self.docs)


def test_lc_routes_over_split_chunks_with_stable_ids_pair_every_query(lc_make, rows) -> None:
    chunks = _lc_chunks()
    ids = [f"policy-{n}" for n in range(len(chunks))]
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=32))
    store.add_documents(chunks, ids=ids)
    current = store.as_retriever(search_kwargs={"k": 2})
    wider = store.as_retriever(search_kwargs={"k": 4})
    shadow = lc_make(current, wider)
    served = shadow.invoke(QUERY)
    assert [d.id for d in served] == [d.id for d in current.invoke(QUERY)]
    shadow.flush()
    report = ShadowReport.from_rows(rows)
    assert shadow.counts.paired == 1 and shadow.counts.invalidated == 0
    assert report.recall_of_baseline == 1.0
    assert len(rows) == 4 and sum(r.baseline_selected for r in rows) == 2
    assert not _leaks(rows, ids)


def test_lc_split_chunks_without_ids_pair_copies_in_order(lc_make, rows) -> None:
    chunks = _lc_chunks()
    assert all(c.id is None for c in chunks)
    shadow = lc_make(RunnableLambda(lambda q: chunks[:3]), RunnableLambda(lambda q: chunks))
    shadow.invoke(QUERY)
    shadow.flush()
    assert shadow.counts.paired == 1
    assert sum(r.baseline_present and r.candidate_present for r in rows) == 3
    assert len(rows) == len(chunks)


@pytest.mark.parametrize(("baseline", "candidate", "outcome"), [
    ([], [], ("paired", 0)),
    ([Document(id="a", page_content="Refunds within 30 days.")], [], ("paired", 1)),
    # The same text under two ids: two passages, both included.
    ([Document(id="a", page_content="Refunds within 30 days."),
      Document(id="b", page_content="Refunds within 30 days.")],
     [Document(id="b", page_content="Refunds within 30 days.")], ("paired", 2)),
    # One id with two texts cannot be attributed: refused, not guessed.
    ([Document(id="a", page_content="Refunds within 30 days.")],
     [Document(id="a", page_content="Refunds within 30 days."),
      Document(id="a", page_content="Gift cards never expire.")], ("capture_refused", 0)),
    # A chunk of whitespace renders as nothing.
    ([Document(id="a", page_content="Refunds within 30 days.")],
     [Document(id="b", page_content="  \n")], ("capture_refused", 0)),
], ids=["both-empty", "candidate-empty", "same-text-two-ids", "one-id-two-texts",
        "blank-chunk"])
def test_lc_odd_answers_are_paired_or_counted_and_always_served(
    lc_make, rows, baseline, candidate, outcome
) -> None:
    shadow = lc_make(RunnableLambda(lambda q: baseline), RunnableLambda(lambda q: candidate))
    assert shadow.invoke(QUERY) == baseline
    shadow.flush()
    counts = shadow.counts.model_dump()
    assert counts[outcome[0]] == 1 and counts["rows"] == len(rows) == outcome[1]


@pytest.mark.parametrize(("score", "paired"), [
    (np.float32(0.25), True), (np.float64(0.75), True), (np.int64(1), True),
    (float("nan"), False), (None, False), ("0.5", False), (True, False), (1.5, False),
])
def test_lc_metadata_scores_of_any_type_are_used_or_refused(lc_make, rows, score,
                                                            paired) -> None:
    docs = [Document(id="a", page_content="Refunds within 30 days.", metadata={"s": score})]
    shadow = lc_make(RunnableLambda(lambda q: docs), RunnableLambda(lambda q: docs),
                     score_key="s")
    assert shadow.invoke(QUERY) == docs
    shadow.flush()
    assert (shadow.counts.paired, shadow.counts.capture_refused) == ((1, 0) if paired else (0, 1))
    if paired:
        assert type(rows[0].baseline_score) is float


def test_lc_served_documents_edited_in_place_do_not_change_the_comparison(lc_make, rows,
                                                                          release) -> None:
    # Chunks without ids (a splitter's output) are identified by their text.
    def chunks(query: str) -> list[Document]:
        return [Document(page_content="Refunds within 30 days."),
                Document(page_content="Keep the receipt.")]

    # One worker, held by an earlier comparison, so the capture runs after the edit.
    busy = SyncOnly(docs=[], release=release)
    shadow = lc_make(RunnableLambda(chunks), RunnableLambda(chunks), max_workers=1)
    held = lc_make(RunnableLambda(chunks), busy)
    held._recorder = shadow._recorder
    held.invoke(QUERY)
    served = shadow.invoke(QUERY)
    for doc in served:  # the app decorates what it was served, as prompt code does
        doc.page_content = f"[source] {doc.page_content}"
    release.set()
    shadow.flush()
    ours = rows[-2:]
    assert all(r.baseline_present and r.candidate_present for r in ours)


def test_lc_threads_are_served_at_once_and_every_query_is_accounted(lc_make, rows,
                                                                    release) -> None:
    docs = [Document(id="a", page_content="Refunds within 30 days.")]
    candidate = SyncOnly(docs=docs, release=release)
    shadow = lc_make(RunnableLambda(lambda q: docs), candidate, max_in_flight=8,
                     max_workers=2)
    with ThreadPoolExecutor(max_workers=16) as pool:
        served = list(pool.map(shadow.invoke, [f"{QUERY} {n}" for n in range(40)]))
    # Every answer came back while every candidate was still blocked.
    assert all(s == docs for s in served)
    release.set()
    shadow.flush()
    counts = shadow.counts
    assert counts.paired == 8 and counts.dropped_busy == 32 and counts.invalidated == 0


async def test_lc_abatch_serves_each_query_and_pairs_each_one(lc_make, rows) -> None:
    chunks = _lc_chunks()
    ids = [f"policy-{n}" for n in range(len(chunks))]
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=32))
    store.add_documents(chunks, ids=ids)
    shadow = lc_make(store.as_retriever(search_kwargs={"k": 2}),
                     store.as_retriever(search_kwargs={"k": 3}))
    queries = [f"{QUERY} ({n})" for n in range(12)]
    served = await shadow.abatch(queries)
    assert [len(s) for s in served] == [2] * 12
    await shadow.aflush()
    assert shadow.counts.paired == 12 and len({r.query_id for r in rows}) == 12
    assert not _leaks(rows, ids)


def test_lc_asyncio_run_per_request_never_fills_the_recorder(lc_make, rows) -> None:
    docs = [Document(id="a", page_content="Refunds within 30 days.")]
    shadow = lc_make(RunnableLambda(lambda q: docs), RunnableLambda(lambda q: docs),
                     max_in_flight=2)
    for _ in range(6):
        assert asyncio.run(shadow.ainvoke(QUERY)) == docs
    shadow.flush(timeout_s=5)
    counts = shadow.counts
    assert shadow.recorder.in_flight == 0 and counts.dropped_busy == 0
    assert counts.paired + counts.invalidated == 6


async def test_lc_async_blocking_candidate_stays_out_of_the_loops_executor(
    lc_make, rows, release
) -> None:
    # The loop's default executor is where LangChain runs served blocking work
    # (sync retrievers under ainvoke): a hanging candidate must not take it.
    loop = asyncio.get_running_loop()
    served_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="served")
    loop.set_default_executor(served_pool)
    docs = [Document(id="a", page_content="Refunds within 30 days.")]
    candidate = SyncOnly(docs=docs, release=release, threads=[])
    shadow = lc_make(SyncOnly(docs=docs, threads=[]), candidate, timeout_s=0.01)
    try:
        for _ in range(3):
            # The guard only ends a test that would otherwise wait forever.
            assert await asyncio.wait_for(shadow.ainvoke(QUERY), 10) == docs
            await asyncio.wait_for(shadow.aflush(), 10)
    finally:
        release.set()
    assert shadow.counts.candidate_timed_out == 3
    assert candidate.threads and not any(t.startswith("served") for t in candidate.threads)


# --- LlamaIndex ---------------------------------------------------------------------


@pytest.fixture
def li_make(rows: list[PairedDecision]) -> Iterator[Any]:
    built: list[LIShadow] = []

    def build(baseline: Any, candidate: Any, **options: Any) -> LIShadow:
        shadow = LIShadow(baseline, candidate, rows.extend, **options)
        built.append(shadow)
        return shadow

    yield build
    for shadow in built:
        _close(shadow)


class Fixed(LIRetriever):
    """Returns the given nodes; records whether it ran on an event loop's thread."""

    def __init__(self, nodes: list[NodeWithScore], release: threading.Event | None = None):
        super().__init__()
        self.nodes = nodes
        self.release = release
        self.on_loop: list[bool] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        try:
            asyncio.get_running_loop()
            self.on_loop.append(True)
        except RuntimeError:
            self.on_loop.append(False)
        if self.release is not None:
            self.release.wait()
        return [NodeWithScore(node=n.node, score=n.score) for n in self.nodes]


class Signal(BaseNodePostprocessor):
    """Sets an event once the route's earlier postprocessors have run."""

    event: Any

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        self.event.set()
        return nodes


class Await(BaseNodePostprocessor):
    """Holds the served query engine until the event is set."""

    event: Any

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        assert self.event.wait(30)
        return nodes


class Rescore(BaseNodePostprocessor):
    """Rescores in place, as `SentenceTransformerRerank` does with cross-encoder logits."""

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        for n in nodes:
            n.score = 7.5
        return nodes


def _li_nodes() -> list[NodeWithScore]:
    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=10)
    nodes = splitter.get_nodes_from_documents([LIDocument(text=POLICY, id_="policy.md")])
    return [NodeWithScore(node=n, score=0.5) for n in nodes]


def test_li_routes_over_sentence_split_nodes_pair_every_query(li_make, rows) -> None:
    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=10)
    index = VectorStoreIndex.from_documents([LIDocument(text=POLICY, id_="policy.md")],
                                            embed_model=MockEmbedding(embed_dim=8),
                                            transformations=[splitter])
    current = index.as_retriever(similarity_top_k=2)
    wider = index.as_retriever(similarity_top_k=4)
    shadow = li_make(current, wider)
    served = shadow.retrieve(QUERY)
    assert [n.node.node_id for n in served] == [n.node.node_id for n in current.retrieve(QUERY)]
    shadow.flush()
    assert shadow.counts.paired == 1 and ShadowReport.from_rows(rows).recall_of_baseline == 1.0
    node_ids = [n.node_id for n in index.docstore.docs.values()]
    assert not _leaks(rows, node_ids)


def test_li_a_candidate_reranking_with_an_llm_does_not_take_the_served_wire(li_make,
                                                                            rows) -> None:
    nodes = _li_nodes()
    reranked = threading.Event()
    candidate = RetrieverQueryEngine.from_args(
        Fixed(nodes), llm=MockLLM(),
        node_postprocessors=[LLMRerank(llm=MockLLM(), top_n=2), Signal(event=reranked)])
    shadow = li_make(Fixed(nodes[:2]), candidate, observe_wire=True)
    # The served engine synthesises only after the candidate's LLM call was made.
    served = RetrieverQueryEngine.from_args(shadow, llm=MockLLM(),
                                            node_postprocessors=[Await(event=reranked)])
    served.query(QUERY)
    shadow.flush()
    assert shadow.counts.paired == 1 and shadow.counts.invalidated == 0
    assert [r.baseline_visible for r in rows if r.baseline_included] == [True, True]


def test_li_served_nodes_rescored_in_place_do_not_change_the_comparison(li_make, rows,
                                                                       release) -> None:
    nodes = _li_nodes()[:2]
    shadow = li_make(Fixed(nodes), Fixed(nodes), use_node_scores=True, max_workers=1)
    held = li_make(Fixed(nodes), Fixed(nodes, release=release))
    held._recorder = shadow._recorder
    held.retrieve(QUERY)  # holds the only worker
    engine = RetrieverQueryEngine.from_args(shadow, llm=MockLLM(),
                                            node_postprocessors=[Rescore()])
    engine.query(QUERY)
    release.set()
    shadow.flush()
    assert shadow.counts.capture_refused == 0
    assert [r.baseline_score for r in rows[-2:]] == [0.5, 0.5]  # as served, not 7.5


async def test_li_async_blocking_candidate_runs_off_the_event_loop(li_make, rows) -> None:
    nodes = _li_nodes()
    candidate = Fixed(nodes)
    shadow = li_make(Fixed(nodes[:2]), candidate)
    served = await shadow.aretrieve(QUERY)
    assert len(served) == 2
    await shadow.aflush()
    assert shadow.counts.paired == 1
    assert candidate.on_loop == [False]


async def test_li_async_query_engine_candidate_runs_off_the_event_loop(li_make, rows) -> None:
    nodes = _li_nodes()
    inner = Fixed(nodes)
    shadow = li_make(Fixed(nodes[:2]), RetrieverQueryEngine.from_args(inner, llm=MockLLM()))
    await shadow.aretrieve(QUERY)
    await shadow.aflush()
    assert shadow.counts.paired == 1 and inner.on_loop == [False]


def test_li_asyncio_run_per_request_never_fills_the_recorder(li_make, rows) -> None:
    nodes = _li_nodes()
    shadow = li_make(Fixed(nodes[:2]), Fixed(nodes), max_in_flight=2)
    for _ in range(6):
        assert len(asyncio.run(shadow.aretrieve(QUERY))) == 2
    shadow.flush(timeout_s=5)
    counts = shadow.counts
    assert shadow._recorder.in_flight == 0 and counts.dropped_busy == 0
    assert counts.paired + counts.invalidated == 6


@pytest.mark.parametrize(("score", "paired"), [
    (np.float32(0.25), True), (None, False), (float("nan"), False), (3.2, False),
])
def test_li_node_scores_of_any_type_are_used_or_refused(li_make, rows, score, paired) -> None:
    nodes = [NodeWithScore(node=TextNode(id_="a", text="Refunds within 30 days."),
                           score=score)]
    shadow = li_make(Fixed(nodes), Fixed(nodes), use_node_scores=True)
    assert [n.score for n in shadow.retrieve(QUERY)] == [score] or score != score
    shadow.flush()
    assert (shadow.counts.paired, shadow.counts.capture_refused) == ((1, 0) if paired else (0, 1))
