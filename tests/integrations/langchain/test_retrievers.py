"""BudgetedRetriever: LangChain's standard retriever tests, events, and an LCEL chain."""

from __future__ import annotations

import re
import threading
from operator import itemgetter
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, get_buffer_string
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    ConfigurableField,
    RunnableConfig,
    RunnableLambda,
    RunnablePassthrough,
)
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

from capsa.budget import Budget, estimate_tokens
from capsa.demo.corpus_source import DOCUMENTS, QUESTIONS
from capsa.langchain import BudgetedRetriever, ScoredRetriever, budget_for_model, format_packet


def corpus() -> list[Document]:
    """The sample corpus, one document per paragraph."""
    return [Document(page_content=block, id=f"{doc.name}#{n}", metadata={"source": doc.name})
            for doc in DOCUMENTS
            for n, block in enumerate(re.split(r"\n\s*\n", doc.text)) if block.strip()]


def everything() -> RunnableLambda[str, list[Document]]:
    return RunnableLambda(lambda query: corpus())


class TestBudgetedRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BudgetedRetriever]:
        return BudgetedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        store = InMemoryVectorStore.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
        return {"retriever": store.as_retriever(search_kwargs={"k": 6}),
                "budget": Budget(max_tokens=4000), "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "What is the nightly hotel cap?"


class Messages(BaseCallbackHandler):
    """Records what chat models were sent, and capsa's custom events."""

    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.events: list[tuple[str, Any]] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.sent.extend(messages)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


def test_retriever_caps_documents_at_k_and_the_k_kwarg_overrides_it() -> None:
    retriever = BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=2000), k=3)
    assert len(retriever.invoke("hotel cap")) == 3
    assert len(retriever.invoke("hotel cap", k=1)) == 1


def test_retriever_k_never_lifts_the_budgets_own_item_cap() -> None:
    budget = Budget(max_tokens=2000, max_items=2)
    assert len(BudgetedRetriever(retriever=everything(), budget=budget, k=5).invoke("hotel")) == 2


def test_retriever_keeps_the_packet_within_the_budget() -> None:
    retriever = BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=150))
    kept = retriever.invoke("What is the nightly hotel cap in high-cost cities?")
    assert estimate_tokens(format_packet.invoke(kept)) <= 150
    assert "EUR 230" in format_packet.invoke(kept)


def test_retriever_returns_new_documents_with_receipts() -> None:
    kept = BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=150)).invoke("hotel")
    assert all(d.metadata["capsa_receipt"]["dropped"] is None for d in kept)
    assert all(d.metadata["source"] for d in kept)


def test_retriever_reports_kept_and_dropped_as_a_custom_event() -> None:
    handler = Messages()
    retriever = BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=150))
    kept = retriever.invoke("hotel cap", config={"callbacks": [handler]})
    [(name, report)] = handler.events
    assert name == "capsa.compression_report"
    assert report["kept"] == [d.metadata["capsa_receipt"]["passage_id"] for d in kept]
    assert len(report["kept"]) + len(report["dropped"]) == len(corpus())


async def test_retriever_async_path_packs_and_reports() -> None:
    retriever = BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=150), k=2)
    events = [e async for e in retriever.astream_events("hotel cap", version="v2")
              if e["event"] in ("on_custom_event", "on_retriever_end")]
    assert [e["event"] for e in events] == ["on_custom_event", "on_retriever_end"]
    assert len(events[1]["data"]["output"]) == 2


def test_retriever_counts_with_the_chat_model_it_is_given() -> None:
    model = FakeListChatModel(responses=["ok"], custom_get_token_ids=lambda text: [0] * len(text))
    retriever = BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=400),
                                  model=model)
    assert len(format_packet.invoke(retriever.invoke("hotel cap"))) <= 400


@pytest.mark.parametrize("sample", QUESTIONS, ids=lambda q: q.question[:40])
def test_lcel_chain_sends_the_model_a_packet_that_fits_and_holds_the_answer(sample: Any) -> None:
    handler = Messages()
    retriever: BaseRetriever = BudgetedRetriever(retriever=everything(),
                                                 budget=Budget(max_tokens=200))
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from the documents only.\n{context}"), ("human", "{question}")])
    chain = ({"context": retriever | format_packet, "question": RunnablePassthrough()}
             | prompt | FakeListChatModel(responses=["noted"]) | StrOutputParser())

    assert chain.invoke(sample.question, config={"callbacks": [handler]}) == "noted"
    [[system, human]] = handler.sent
    packet = format_packet.invoke(retriever.invoke(sample.question))
    assert system.content == f"Answer from the documents only.\n{packet}"
    assert human.content == sample.question
    assert estimate_tokens(packet) <= 200
    assert sample.answer in packet


TENANT_DOCS = {
    "acme": [Document(page_content="Acme's hotel cap is EUR 165 a night.", id="acme-1",
                      metadata={"source": "/srv/tenants/acme/travel.pdf"})],
    "globex": [Document(page_content="Globex's hotel cap is USD 300 a night.", id="globex-1",
                        metadata={"source": "/srv/tenants/globex/travel.pdf"})],
}


class TenantRetriever(BaseRetriever):
    """Answers from one tenant's documents; the tenant is set per call through `configurable`."""

    tenant: str = "acme"

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return list(TENANT_DOCS[self.tenant])


def tenant_retriever() -> BudgetedRetriever:
    base = TenantRetriever().configurable_fields(tenant=ConfigurableField(id="tenant"))
    return BudgetedRetriever(retriever=base, budget=Budget(max_tokens=300))


def tenant_config(tenant: str) -> RunnableConfig:
    return {"configurable": {"tenant": tenant}, "tags": [f"tenant:{tenant}"],
            "metadata": {"tenant": tenant}}


def test_retriever_hands_configurable_fields_to_the_wrapped_retriever() -> None:
    retriever = tenant_retriever()
    assert [d.id for d in retriever.invoke("hotel cap", config=tenant_config("globex"))] == [
        "globex-1"]
    assert [d.id for d in retriever.invoke("hotel cap", config=tenant_config("acme"))] == [
        "acme-1"]


def test_retriever_never_mixes_tenants_in_a_concurrent_batch() -> None:
    retriever = tenant_retriever()
    tenants = ["acme", "globex"] * 4
    results = retriever.batch(["hotel cap"] * len(tenants),
                              config=[tenant_config(t) for t in tenants])
    for tenant, kept in zip(tenants, results, strict=True):
        assert {d.id.split("-")[0] for d in kept if d.id} == {tenant}


async def test_retriever_async_path_hands_configurable_fields_on() -> None:
    kept = await tenant_retriever().ainvoke("hotel cap", config=tenant_config("globex"))
    assert [d.id for d in kept] == ["globex-1"]


def test_retriever_hands_tags_and_metadata_to_the_wrapped_retriever() -> None:
    seen: list[tuple[list[str], dict[str, Any]]] = []

    class Spy(BaseCallbackHandler):
        def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID,
                               parent_run_id: UUID | None = None,
                               tags: list[str] | None = None,
                               metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
            if parent_run_id is not None:
                seen.append((tags or [], metadata or {}))

    config = tenant_config("globex")
    tenant_retriever().invoke("hotel cap", config={**config, "callbacks": [Spy()]})
    [(tags, metadata)] = seen
    assert "tenant:globex" in tags and metadata["tenant"] == "globex"


def test_retriever_refuses_unknown_constructor_arguments() -> None:
    with pytest.raises(ValidationError, match="top_k"):
        BudgetedRetriever(retriever=everything(), budget=Budget(max_tokens=100),
                          top_k=3)  # type: ignore[call-arg]


def test_budget_for_model_fits_the_whole_request_in_the_models_window() -> None:
    handler = Messages()
    model = FakeListChatModel(responses=["noted"],
                              profile={"max_input_tokens": 900, "max_output_tokens": 300})
    system = "Answer from the documents only. Cite documents by their id."
    history: list[BaseMessage] = [
        HumanMessage("Which class do I book for trains?"),
        AIMessage("Standard class, unless the journey is longer than four hours [2]."),
    ] * 4
    question = "What is the nightly hotel cap in high-cost cities?"
    budget = budget_for_model(model, system_prompt=system,
                              messages=[*history, HumanMessage(question)], margin_tokens=10)
    assert budget.max_tokens < 600 - estimate_tokens(system)
    prompt = ChatPromptTemplate.from_messages([
        ("system", system + "\n{context}"), MessagesPlaceholder("history"),
        ("human", "{question}")])
    chain = ({"context": itemgetter("question") | BudgetedRetriever(retriever=everything(),
                                                                    budget=budget) | format_packet,
              "question": itemgetter("question"), "history": itemgetter("history")}
             | prompt | model | StrOutputParser())
    chain.invoke({"question": question, "history": history}, config={"callbacks": [handler]})
    [sent] = handler.sent
    assert sum(estimate_tokens(get_buffer_string([m])) for m in sent) <= 900 - 300
    assert "EUR 230" in str(sent[0].content)


async def test_async_retrieval_packs_off_the_event_loop(loop_watch: Any) -> None:
    texts = loop_watch.large_texts()
    docs = [Document(page_content=text, id=f"d{n}") for n, text in enumerate(texts)]
    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda query: docs),
                                  budget=Budget(max_tokens=2000), tokenizer=loop_watch.tokenizer)
    loop_watch.enter("tenant-b")
    kept = await loop_watch.run(retriever.ainvoke("local variable unbound"))
    assert kept and loop_watch.ticks_while_packing > 0
    assert threading.get_ident() not in loop_watch.threads
    assert loop_watch.tenants == {"tenant-b"}


# --- ScoredRetriever: a vector store's hits with the scores as_retriever() drops -------


class TestScoredRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[ScoredRetriever]:
        return ScoredRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        store = InMemoryVectorStore.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
        return {"vectorstore": store, "k": 3}

    @property
    def retriever_query_example(self) -> str:
        return "What is the nightly hotel cap?"


class CosineStore(InMemoryVectorStore):
    """An in-memory store with a relevance function, as Chroma, FAISS or PGVector have."""

    def _select_relevance_score_fn(self) -> Any:
        return lambda similarity: (similarity + 1.0) / 2.0


class DistanceStore(InMemoryVectorStore):
    """A store whose raw scores are distances, lowest first, as FAISS's L2 search gives."""

    def similarity_search_with_score(self, query: str, k: int = 4,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        return [(doc, 1.0 - similarity)
                for doc, similarity in super().similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search_with_score(self, query: str, k: int = 4,
                                            **kwargs: Any) -> list[tuple[Document, float]]:
        return self.similarity_search_with_score(query, k, **kwargs)


def test_scored_retriever_keeps_the_stores_relevance_scores_on_copies() -> None:
    store = CosineStore.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
    expected = store.similarity_search_with_relevance_scores("hotel cap", k=4)

    hits = ScoredRetriever(vectorstore=store, search_kwargs={"k": 4}).invoke("hotel cap")

    assert [(hit.id, hit.metadata["relevance_score"]) for hit in hits] == [
        (doc.id, score) for doc, score in expected]
    assert all("relevance_score" not in doc.metadata
               for doc in store.get_by_ids([hit.id for hit in hits if hit.id]))


@pytest.mark.parametrize("store_type", [InMemoryVectorStore, DistanceStore])
def test_scored_retriever_reads_raw_scores_by_the_order_of_the_hits(
        store_type: type[InMemoryVectorStore]) -> None:
    store = store_type.from_documents(corpus(), DeterministicFakeEmbedding(size=32))

    hits = ScoredRetriever(vectorstore=store).invoke("hotel cap", k=5)
    scores = [hit.metadata["score"] for hit in hits]

    assert len(hits) == 5
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    # a raw score has no 0-to-1 scale: never where rerankers and ShadowRetriever read one
    assert not any("relevance_score" in hit.metadata for hit in hits)


def test_a_packed_document_keeps_its_subclass_and_fields() -> None:
    class Cited(Document):
        court: str = ""

    originals = [Cited(page_content="The hotel cap is EUR 165. Trains are slow.", court="High")]

    packed = BudgetedRetriever(retriever=RunnableLambda(lambda query: originals),
                               budget=Budget(max_tokens=200)).invoke("hotel cap")

    assert [type(d).__name__ for d in packed] == ["Cited"] and packed[0].court == "High"
    assert "capsa_receipt" not in originals[0].metadata


@pytest.mark.parametrize("store_type", [InMemoryVectorStore, DistanceStore])
async def test_scored_retriever_refuses_a_threshold_on_raw_scores(
        store_type: type[InMemoryVectorStore]) -> None:
    """Raw scores have no scale to hold a threshold against; ignoring it returned far hits."""
    store = store_type.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
    retriever = ScoredRetriever(vectorstore=store, search_kwargs={"score_threshold": 0.99})
    with pytest.raises(ValueError, match=r"score_threshold=0\.99"):
        retriever.invoke("hotel cap")
    with pytest.raises(ValueError, match="no relevance function"):
        await retriever.ainvoke("hotel cap")


def test_scored_retriever_applies_a_threshold_where_the_store_scores_relevance() -> None:
    store = CosineStore.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
    every = ScoredRetriever(vectorstore=store, k=8).invoke("hotel cap")
    cut = sorted(hit.metadata["relevance_score"] for hit in every)[len(every) // 2]
    kept = ScoredRetriever(vectorstore=store, k=8,
                           search_kwargs={"score_threshold": cut}).invoke("hotel cap")
    assert 0 < len(kept) < len(every)
    assert all(hit.metadata["relevance_score"] >= cut for hit in kept)


async def test_scored_retriever_searches_asynchronously_too() -> None:
    store = DistanceStore.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
    retriever = ScoredRetriever(vectorstore=store, search_kwargs={"k": 3})

    hits = await retriever.ainvoke("hotel cap")

    assert [hit.id for hit in hits] == [hit.id for hit in retriever.invoke("hotel cap")]
    assert [hit.metadata["score"] for hit in hits] == [
        hit.metadata["score"] for hit in retriever.invoke("hotel cap")]


def test_budgeted_retriever_packs_a_scored_retrievers_hits_in_a_chain() -> None:
    store = CosineStore.from_documents(corpus(), DeterministicFakeEmbedding(size=32))
    retriever = BudgetedRetriever(
        retriever=ScoredRetriever(vectorstore=store, search_kwargs={"k": 8}),
        budget=Budget(max_tokens=300))
    model = FakeListChatModel(responses=["EUR 165."])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from:\n{context}"), ("human", "{question}")])
    chain = ({"context": retriever | format_packet, "question": RunnablePassthrough()}
             | prompt | model | StrOutputParser())
    seen = Messages()

    assert chain.invoke("What is the nightly hotel cap?", config={"callbacks": [seen]}) == \
        "EUR 165."
    kept = retriever.invoke("What is the nightly hotel cap?")
    assert kept and all("capsa_receipt" in doc.metadata and "relevance_score" in doc.metadata
                        for doc in kept)
    assert estimate_tokens(seen.sent[0][0].content) <= 300 + 20  # the packet and the frame
