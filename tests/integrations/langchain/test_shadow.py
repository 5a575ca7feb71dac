"""LangChain ShadowRetriever over the sample corpus: serve the baseline, observe the candidate."""

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
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from capsa.demo.corpus_source import DOCUMENTS
from capsa.langchain import ShadowRetriever
from capsa.shadow import PairedDecision, ShadowReport
from capsa.shadow.routes import ROUTES, sample_passages

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


def test_shadow_serves_the_baseline_documents_unchanged(vector_retriever, rows) -> None:
    baseline = LexicalRetriever()
    shadow = ShadowRetriever(baseline=baseline, candidate=vector_retriever, sink=rows.extend)
    for query in QUERIES:
        assert shadow.invoke(query) == baseline.invoke(query)


def test_shadow_over_the_sample_corpus_reports_every_query(vector_retriever, rows) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=vector_retriever,
                             sink=rows.extend)
    for query in QUERIES:
        shadow.invoke(query)
    report = ShadowReport.from_rows(rows, invalidated=shadow.counts.invalidated)
    assert (report.queries, report.invalidated) == (len(QUERIES), 0)
    assert shadow.counts.paired == len(QUERIES) and shadow.counts.rows == len(rows)
    # a hash embedding and BM25 rarely agree: the report must show disagreement
    assert report.recall_of_baseline is not None and report.recall_of_baseline < 0.5


def test_shadow_rows_from_the_sample_corpus_carry_no_identity(vector_retriever, rows) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=vector_retriever,
                             sink=rows.extend)
    for query in QUERIES:
        shadow.invoke(query)
    blob = json.dumps([r.model_dump(mode="json") for r in rows]).lower()
    assert not [p.source_id for p in sample_passages() if p.source_id.lower() in blob]
    assert not [d.name for d in DOCUMENTS if d.name.lower() in blob]
    tokens = set(re.findall(r"[a-z0-9_]+", blob))
    words = {w for t in [p.text for p in sample_passages()] + QUERIES
             for w in re.findall(r"[a-z0-9_]+", t.lower()) if not w.isdigit()}
    assert words & tokens == set()


async def test_shadow_async_path_serves_the_baseline_and_pairs(vector_retriever, rows) -> None:
    baseline = LexicalRetriever()
    shadow = ShadowRetriever(baseline=baseline, candidate=vector_retriever, sink=rows.extend)
    served = await shadow.ainvoke(QUERIES[0])
    assert served == await baseline.ainvoke(QUERIES[0])
    assert shadow.counts.paired == 1 and rows


def test_shadow_counts_a_failing_candidate_and_still_serves(rows) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=Failing(), sink=rows.extend)
    served = shadow.invoke(QUERIES[0])
    assert served == LexicalRetriever().invoke(QUERIES[0])
    assert shadow.counts.candidate_raised == 1 and rows == []


async def test_shadow_async_counts_a_failing_candidate_and_still_serves(rows) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=Failing(), sink=rows.extend)
    served = await shadow.ainvoke(QUERIES[0])
    assert served == LexicalRetriever().invoke(QUERIES[0])
    assert shadow.counts.candidate_raised == 1


def test_shadow_counts_a_candidate_that_times_out(rows, release) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=Hanging(release=release),
                             sink=rows.extend, timeout_s=0.05)
    assert shadow.invoke(QUERIES[0]) == LexicalRetriever().invoke(QUERIES[0])
    assert shadow.counts.candidate_timed_out == 1 and rows == []


async def test_shadow_async_counts_a_candidate_that_times_out(rows, release) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=Hanging(release=release),
                             sink=rows.extend, timeout_s=0.05)
    assert await shadow.ainvoke(QUERIES[0]) == LexicalRetriever().invoke(QUERIES[0])
    assert shadow.counts.candidate_timed_out == 1


def test_shadow_propagates_the_baselines_own_failure(rows, vector_retriever) -> None:
    shadow = ShadowRetriever(baseline=Failing(), candidate=vector_retriever, sink=rows.extend)
    with pytest.raises(ConnectionError):
        shadow.invoke(QUERIES[0])


def test_shadow_counts_a_candidate_returning_one_document_twice(rows) -> None:
    doc = Document(id="x", page_content="Refunds within 30 days.")
    shadow = ShadowRetriever(baseline=Fixed(docs=[doc]), candidate=Fixed(docs=[doc, doc]),
                             sink=rows.extend)
    assert shadow.invoke("refunds") == [doc]
    assert shadow.counts.capture_refused == 1 and rows == []


def test_shadow_identifies_documents_without_an_id_by_their_content(rows) -> None:
    a = Document(page_content="Refunds within 30 days.")
    b = Document(page_content="Store credit never expires.")
    shadow = ShadowRetriever(baseline=Fixed(docs=[a, b]), candidate=Fixed(docs=[b]),
                             sink=rows.extend)
    shadow.invoke("refunds")
    assert sorted((r.baseline_selected, r.candidate_selected) for r in rows) == [
        (True, False), (True, True)]


def test_shadow_uses_metadata_scores_when_a_key_is_given(rows) -> None:
    docs = [Document(id="a", page_content="Refunds within 30 days.", metadata={"s": 0.25}),
            Document(id="b", page_content="Store credit never expires.", metadata={"s": 0.75})]
    shadow = ShadowRetriever(baseline=Fixed(docs=docs), candidate=Fixed(docs=docs),
                             sink=rows.extend, score_key="s")
    shadow.invoke("refunds")
    assert sorted(r.baseline_score for r in rows if r.baseline_score is not None) == [0.25, 0.75]


def test_shadow_refuses_a_missing_metadata_score_as_ambiguous(rows) -> None:
    docs = [Document(id="a", page_content="Refunds within 30 days.")]
    shadow = ShadowRetriever(baseline=Fixed(docs=docs), candidate=Fixed(docs=docs),
                             sink=rows.extend, score_key="s")
    assert shadow.invoke("refunds") == docs
    assert shadow.counts.capture_refused == 1


def test_shadow_forwards_invoke_kwargs_to_both_retrievers(rows, vector_retriever) -> None:
    shadow = ShadowRetriever(baseline=vector_retriever, candidate=vector_retriever,
                             sink=rows.extend)
    assert len(shadow.invoke(QUERIES[0], k=1)) == 1
    assert len(rows) == 1


def test_shadow_reports_each_outcome_as_a_custom_event(rows) -> None:
    handler = Events()
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=Failing(), sink=rows.extend)
    shadow.invoke(QUERIES[0], config={"callbacks": [handler]})
    ((name, data),) = handler.events
    assert name == "capsa.shadow"
    assert data["outcome"] == "candidate_raised" and data["candidate_raised"] == 1


def test_shadow_serves_a_chain_with_the_baseline_context(vector_retriever, rows) -> None:
    shadow = ShadowRetriever(baseline=LexicalRetriever(), candidate=vector_retriever,
                             sink=rows.extend)
    prompt = ChatPromptTemplate.from_messages([("human", "Context:\n{context}\n\nQ: {question}")])
    chain = (
        {"context": shadow | (lambda docs: "\n\n".join(d.page_content for d in docs)),
         "question": RunnablePassthrough()}
        | prompt | ParrotFakeChatModel() | StrOutputParser()
    )
    query = "How much is the monthly internet stipend for remote workers?"
    answer = chain.invoke(query)
    assert "EUR 30" in answer
    assert shadow.counts.paired == 1
