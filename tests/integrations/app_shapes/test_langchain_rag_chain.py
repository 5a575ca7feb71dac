"""The LCEL RAG chain users write, with CapsaCompressor inside ContextualCompressionRetriever.

``{"context": retriever | format_packet, "question": RunnablePassthrough()} | prompt
| model | StrOutputParser()``, run every way LCEL runs it (invoke, batch, ainvoke,
abatch, astream), fed by a vector store, an `EnsembleRetriever`, documents with
messy metadata and 500 documents. Each test checks what the model was sent
against the budget (counted with the compressor's own tokenizer), that the
retriever's documents come back unchanged, and that the report accounts for
every document retrieved.
"""

from __future__ import annotations

import copy
from typing import Any
from uuid import UUID

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from capsa.budget import Budget, estimate_tokens
from capsa.langchain import BudgetedRetriever, CapsaCompressor, format_packet

MAX_TOKENS = 80
PREFIX = "Answer from the context only.\n"
QUESTIONS = ["What is the hotel cap in London?", "How much is the internet stipend?",
             "Which class are trains booked in?"]


def corpus() -> list[Document]:
    """Documents as loaders and splitters leave them: ids or none, odd metadata, an empty chunk."""
    return [
        Document(id="hotel", page_content="Flights are booked in economy class. The nightly "
                 "hotel cap is EUR 165. In London the hotel cap is EUR 230.",
                 metadata={"source": "/srv/policies/travel.pdf", "page": 2, "page_label": "3"}),
        Document(page_content="Rail travel is booked in standard class, 14 days ahead.",
                 metadata={"source": "travel.pdf", "tags": ["rail", "booking"], "version": 3}),
        Document(id="remote", page_content="The internet stipend for remote workers is EUR 30.",
                 metadata={"source": None, "author": None, "reviewed": {"by": "ops", "on": None}}),
        Document(id="blank", page_content="", metadata={"source": "empty.md"}),
        Document(page_content="Meals are paid up to EUR 55 a day; alcohol is never refunded.",
                 metadata={"relevance_score": None, "score": "high", "page_number": [1, 2]}),
    ]


class Recorder(BaseCallbackHandler):
    """What the model was sent, and capsa's compression reports."""

    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.reports: list[dict[str, Any]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.sent.extend(messages)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == "capsa.compression_report":
            self.reports.append(data)

    def contexts(self) -> list[str]:
        """The context each model call got: its system message after the prompt's prefix."""
        return [str(messages[0].content).removeprefix(PREFIX) for messages in self.sent]


def rag_chain(retriever: Runnable[str, list[Document]]) -> Runnable[str, str]:
    prompt = ChatPromptTemplate.from_messages([("system", PREFIX + "{context}"),
                                               ("human", "{question}")])
    model = FakeListChatModel(responses=["EUR 230."])
    return ({"context": retriever | format_packet, "question": RunnablePassthrough()}
            | prompt | model | StrOutputParser())


def compressed(base: Runnable[str, list[Document]], max_tokens: int = MAX_TOKENS
               ) -> ContextualCompressionRetriever:
    return ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=max_tokens)),
        base_retriever=base)


def store_retriever(documents: list[Document], k: int = 5) -> BaseRetriever:
    store = InMemoryVectorStore.from_documents(documents, DeterministicFakeEmbedding(size=32))
    return store.as_retriever(search_kwargs={"k": k})


def assert_accounted(report: dict[str, Any], retrieved: int) -> None:
    """Every retrieved document is kept or dropped with a reason, exactly once."""
    dropped = [d["id"] for d in report["dropped"]]
    assert all(d["reason"] for d in report["dropped"])
    assert len(report["receipts"]) == retrieved
    assert sorted(report["kept"] + dropped) == sorted(r["passage_id"] for r in report["receipts"])
    assert len(set(report["kept"] + dropped)) == retrieved


def test_rag_chain_sends_a_packet_within_the_budget_and_leaves_the_store_alone() -> None:
    documents = corpus()
    before = copy.deepcopy(documents)
    recorder = Recorder()
    answer = rag_chain(compressed(store_retriever(documents))).invoke(
        QUESTIONS[0], config={"callbacks": [recorder]})
    assert answer == "EUR 230."
    [context] = recorder.contexts()
    assert "EUR 230" in context and estimate_tokens(context) <= MAX_TOKENS
    assert documents == before
    [report] = recorder.reports
    assert_accounted(report, retrieved=5)
    assert {"id": "blank", "reason": "empty", "detail": "the passage has no text"} in report[
        "dropped"]


def test_rag_chain_batch_packs_each_question_for_itself() -> None:
    recorder = Recorder()
    chain = rag_chain(compressed(RunnableLambda(lambda query: corpus())))
    assert chain.batch(QUESTIONS, config={"callbacks": [recorder]}) == ["EUR 230."] * 3
    assert sorted(r["query"] for r in recorder.reports) == sorted(QUESTIONS)
    assert all(estimate_tokens(c) <= MAX_TOKENS for c in recorder.contexts())
    for report in recorder.reports:
        assert_accounted(report, retrieved=5)


async def test_rag_chain_ainvoke_sends_what_invoke_sends() -> None:
    sync, async_ = Recorder(), Recorder()
    chain = rag_chain(compressed(store_retriever(corpus())))
    chain.invoke(QUESTIONS[1], config={"callbacks": [sync]})
    assert await chain.ainvoke(QUESTIONS[1], config={"callbacks": [async_]}) == "EUR 230."
    assert async_.contexts() == sync.contexts()
    assert async_.reports == sync.reports


async def test_rag_chain_abatch_packs_each_question_for_itself() -> None:
    recorder = Recorder()
    chain = rag_chain(compressed(RunnableLambda(lambda query: corpus())))
    assert await chain.abatch(QUESTIONS, config={"callbacks": [recorder]}) == ["EUR 230."] * 3
    assert sorted(r["query"] for r in recorder.reports) == sorted(QUESTIONS)
    assert all(estimate_tokens(c) <= MAX_TOKENS for c in recorder.contexts())


async def test_rag_chain_astream_streams_the_answer_after_packing() -> None:
    recorder = Recorder()
    chain = rag_chain(compressed(store_retriever(corpus())))
    chunks = [c async for c in chain.astream(QUESTIONS[0], config={"callbacks": [recorder]})]
    assert "".join(chunks) == "EUR 230." and len(chunks) > 1
    [context] = recorder.contexts()
    assert estimate_tokens(context) <= MAX_TOKENS
    assert [r["query"] for r in recorder.reports] == [QUESTIONS[0]]


def test_ensemble_retriever_feeds_the_compressor() -> None:
    documents = corpus()
    before = copy.deepcopy(documents)
    ensemble = EnsembleRetriever(
        retrievers=[store_retriever(documents, k=3), RunnableLambda(lambda q: documents[2:])],
        weights=[0.5, 0.5])
    fused = ensemble.invoke(QUESTIONS[1])
    recorder = Recorder()
    rag_chain(compressed(ensemble)).invoke(QUESTIONS[1], config={"callbacks": [recorder]})
    [context] = recorder.contexts()
    assert "EUR 30" in context and estimate_tokens(context) <= MAX_TOKENS
    assert_accounted(recorder.reports[0], retrieved=len(fused))
    assert documents == before


def test_budgeted_retriever_over_an_ensemble_takes_k_per_call() -> None:
    documents = corpus()
    ensemble = EnsembleRetriever(retrievers=[store_retriever(documents, k=5),
                                             RunnableLambda(lambda q: documents)])
    budgeted = BudgetedRetriever(retriever=ensemble, budget=Budget(max_tokens=MAX_TOKENS,
                                                                   min_relevance=None))
    assert len(budgeted.invoke(QUESTIONS[0], k=2)) == 2
    assert estimate_tokens(format_packet.invoke(budgeted.invoke(QUESTIONS[0]))) <= MAX_TOKENS


@pytest.mark.parametrize("metadata", [
    {"source": 42, "page_label": 7},
    {"source": ["a.pdf", "b.pdf"], "title": {"en": "Travel"}},
    {"source": {"bucket": "s3", "key": "travel.pdf"}, "page_number": None},
    {"title": None, "relevance_score": "0.9", "score": float("nan")},
    {"source": "", "title": "", "page_label": True},
], ids=["int-source", "list-source", "dict-source", "none-and-strings", "blank-and-bool"])
def test_compressor_takes_any_json_metadata_without_changing_it(metadata: dict[str, Any]) -> None:
    documents = [Document(page_content="The nightly hotel cap is EUR 230 in London.",
                          metadata=metadata),
                 Document(page_content="Trains are booked in standard class.", metadata=metadata)]
    before = copy.deepcopy(documents)
    recorder = Recorder()
    rag_chain(compressed(RunnableLambda(lambda q: documents))).invoke(
        QUESTIONS[0], config={"callbacks": [recorder]})
    [context] = recorder.contexts()
    assert "EUR 230" in context and estimate_tokens(context) <= MAX_TOKENS
    assert repr(documents) == repr(before)  # NaN != NaN, so compare the reprs
    assert_accounted(recorder.reports[0], retrieved=2)


def test_a_splitter_then_the_compressor_in_a_compressor_pipeline() -> None:
    documents = [Document(id="handbook", metadata={"source": "/srv/handbook.pdf", "rev": None},
                          page_content="Trains are booked in standard class. " * 20
                          + "In London the hotel cap is EUR 230. " + "Taxis need a receipt. " * 20)]
    before = copy.deepcopy(documents)
    pipeline = DocumentCompressorPipeline(transformers=[
        RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=20),
        CapsaCompressor(budget=Budget(max_tokens=MAX_TOKENS))])
    retriever = ContextualCompressionRetriever(base_compressor=pipeline,
                                               base_retriever=RunnableLambda(lambda q: documents))
    recorder = Recorder()
    rag_chain(retriever).invoke(QUESTIONS[0], config={"callbacks": [recorder]})
    [context] = recorder.contexts()
    assert "EUR 230" in context and estimate_tokens(context) <= MAX_TOKENS
    assert recorder.reports and len(recorder.reports[0]["receipts"]) > 5  # one per chunk
    assert documents == before


def test_every_document_empty_reaches_the_model_as_no_context_and_says_why() -> None:
    empty = [Document(page_content=""), Document(page_content="  \n "), Document(page_content="")]
    recorder = Recorder()
    rag_chain(compressed(RunnableLambda(lambda q: empty))).invoke(
        QUESTIONS[0], config={"callbacks": [recorder]})
    [report] = recorder.reports
    assert report["kept"] == [] and report["emptied_by"] == "empty"
    assert [d["reason"] for d in report["dropped"]] == ["empty"] * 3


def test_duplicate_and_missing_ids_are_reported_under_distinct_names() -> None:
    documents = [Document(id="x", page_content="The hotel cap is EUR 165."),
                 Document(id="x", page_content="The hotel cap in London is EUR 230."),
                 Document(page_content="The hotel cap in Paris is EUR 210.")]
    kept = compressed(RunnableLambda(lambda q: documents), max_tokens=500).invoke("hotel cap")
    assert [d.id for d in kept] == ["x", "x", None]
    names = [d.metadata["capsa_receipt"]["passage_id"] for d in kept]
    assert len(set(names)) == 3 and names[0] == "x"
    assert sorted(d.metadata["capsa_handle"] for d in kept) == ["1", "2", "3"]


def test_a_fallback_name_never_takes_another_documents_real_id() -> None:
    documents = [Document(id="x", page_content="The hotel cap is EUR 165."),
                 Document(id="x", page_content="The hotel cap in London is EUR 230."),
                 Document(id="1", page_content="The hotel cap in Paris is EUR 210.")]
    kept = compressed(RunnableLambda(lambda q: documents), max_tokens=500).invoke("hotel cap")
    named = {d.metadata["capsa_receipt"]["passage_id"]: d.page_content for d in kept}
    assert len(named) == 3
    assert named["1"] == "The hotel cap in Paris is EUR 210."  # the document whose id is "1"


def test_five_hundred_documents_are_packed_and_every_one_accounted_for() -> None:
    topics = ["hotel cap", "rail class", "meal allowance", "internet stipend", "taxi receipts"]
    documents = [Document(page_content=f"Rule {n}: the {topics[n % 5]} is EUR {n}. "
                          f"It was last reviewed in {2000 + n % 25}.",
                          metadata={"source": f"/srv/handbook/part-{n % 17}.pdf", "n": n,
                                    "owner": None})
                 for n in range(500)]
    before = copy.deepcopy(documents)
    recorder = Recorder()
    rag_chain(compressed(RunnableLambda(lambda q: documents), max_tokens=400)).invoke(
        "What is the hotel cap?", config={"callbacks": [recorder]})
    [context] = recorder.contexts()
    assert estimate_tokens(context) <= 400 and "hotel cap" in context
    assert_accounted(recorder.reports[0], retrieved=500)
    assert documents == before
