"""App shapes the other app-shape files leave out, built from the user docs alone.

LangChain: langchain-classic's ``create_retrieval_chain`` over
``create_stuff_documents_chain`` and ``create_history_aware_retriever``, a
`MultiQueryRetriever` and a `ParentDocumentRetriever` feeding capsa, a LangGraph
`StateGraph` of a custom state that packs node by node (and fans out with
`Send`), `RunnableWithMessageHistory` around a ``RunnablePassthrough.assign``
step named and tagged with ``with_config``, packed documents kept in graph
state through a SQLite checkpoint, loader metadata used as a vector-store
filter, empty retrievals, a `k` far beyond the retrieval, documents without
ids, one compressor shared by threads and tasks over unicode-heavy text, and
`AttachmentMiddleware` beside `CitationCapsuleMiddleware` in one agent.

LlamaIndex: `CondenseQuestionChatEngine`, `SubQuestionQueryEngine` and
`RouterQueryEngine` over query engines that run `CapsaNodePostprocessor`, an
index persisted and loaded from storage over `CapsaDirectoryReader` documents,
``as_retriever(similarity_top_k=..., filters=MetadataFilters(...))`` then the
postprocessor called with a `QueryBundle`, keyword-table and document-summary
indexes, an `AgentWorkflow` handing off between two agents over one
`CapsuleMemory`, one postprocessor shared by threads and tasks, and
``budget_for_llm`` against the default ``compact`` synthesizer.

Every shape checks what the model was sent against the budget (counted with
the adapter's own tokenizer), that the caller's objects are unchanged, that the
report accounts for every retrieved item, and that async gives what sync gives.
"""

from __future__ import annotations

import asyncio
import copy
import operator
import sqlite3
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from capsa.budget import Budget, estimate_tokens
from capsa.guard.extractors import PlainTextExtractor
from capsa.langchain import (
    BudgetedRetriever,
    CapsaCompressor,
    CapsaLoader,
    ScoredRetriever,
    format_packet,
)
from capsa.llama_index.postprocessors import CapsaCompressionEvent

HOTEL = "What is the hotel cap in London?"
STIPEND = "How much is the internet stipend?"
TRAINS = "Which class are trains booked in?"

# Text in several scripts, emoji, typographic quotes and a right-to-left run.
UNICODE_TEXTS = [
    "Flights are booked in economy class. The nightly hotel cap is EUR 165. "
    "In London the hotel cap is EUR 230.",
    "Internet: the stipend for remote workers is EUR 30 a month. Chairs are refunded once.",
    "Rail travel is booked in standard class, 14 days ahead. Taxis need a receipt.",
    "Смета: лимит на отель в Лондоне 230 евро. 東京のホテル上限は2万円です。 "
    "فندق لندن ٢٣٠ يورو.",
    "Meals are paid up to EUR 55 a day; alcohol is never refunded. 🍷🍷 ✓ — “quoted” ‮.",
]
UNICODE_QUESTIONS = [HOTEL, STIPEND, TRAINS, "лимит на отель в Лондоне", "東京のホテル上限",
                     "meals per day alcohol"]


# -- LangChain helpers --------------------------------------------------------------------------


class Recorder(BaseCallbackHandler):
    """What each chat model was sent, and capsa's compression reports."""

    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.reports: list[dict[str, Any]] = []
        self.events: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]],
                            **kwargs: Any) -> None:
        self.sent.extend(messages)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append(name)
        if name == "capsa.compression_report":
            self.reports.append(data)


def policies() -> list[Document]:
    """Documents as a splitter leaves them: some ids, some none, server paths."""
    return [
        Document(id="hotel", page_content="Flights are booked in economy class. The nightly "
                 "hotel cap is EUR 165. In London the hotel cap is EUR 230. Taxis need a "
                 "receipt. Receipts are kept for seven years.",
                 metadata={"source": "/srv/policies/travel.pdf", "page": 2}),
        Document(page_content="The internet stipend for remote workers is EUR 30 a month.",
                 metadata={"source": "/srv/policies/remote.md"}),
        Document(id="rail", page_content="Rail travel is booked in standard class, 14 days "
                 "ahead.", metadata={"source": "/srv/policies/rail.md"}),
    ]


def store_of(documents: list[Document]) -> InMemoryVectorStore:
    return InMemoryVectorStore.from_documents(documents, DeterministicFakeEmbedding(size=32))


def assert_accounted(report: dict[str, Any], retrieved: int) -> None:
    """Every retrieved document is kept or dropped with a reason, exactly once."""
    dropped = [d["id"] for d in report["dropped"]]
    assert all(d["reason"] for d in report["dropped"])
    assert len(report["receipts"]) == retrieved
    assert len(report["kept"] + dropped) == len(set(report["kept"] + dropped)) == retrieved


def system_text(messages: list[BaseMessage], prefix: str) -> str:
    return str(messages[0].content).removeprefix(prefix)


class Fixed(BaseRetriever):
    """Stands in for a vector store's retriever: the same documents for every query."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.docs


# -- LangChain: create_retrieval_chain ---------------------------------------------------------

QA_PREFIX = "Answer from the context only.\n"


def qa_chain(retriever: Runnable[Any, list[Document]]) -> Runnable[dict[str, Any], Any]:
    from langchain_classic.chains import create_retrieval_chain
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain

    prompt = ChatPromptTemplate.from_messages([("system", QA_PREFIX + "{context}"),
                                               ("human", "{input}")])
    combine = create_stuff_documents_chain(FakeListChatModel(responses=["EUR 230."]), prompt)
    return create_retrieval_chain(retriever, combine)


def compressing(base: Runnable[Any, list[Document]], max_tokens: int) -> Any:
    from langchain_classic.retrievers import ContextualCompressionRetriever

    return ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=max_tokens)),
        base_retriever=base)


async def test_create_retrieval_chain_stuffs_a_context_within_the_budget_sync_and_async(
        ) -> None:
    documents = policies()
    before = copy.deepcopy(documents)
    chain = qa_chain(compressing(store_of(documents).as_retriever(search_kwargs={"k": 3}), 45))
    sync, async_ = Recorder(), Recorder()
    out = chain.invoke({"input": HOTEL}, config={"callbacks": [sync]})
    again = await chain.ainvoke({"input": HOTEL}, config={"callbacks": [async_]})
    assert out["answer"] == again["answer"] == "EUR 230."
    # the stuff chain joins page_content, so what it sends is no larger than the packet
    [messages] = sync.sent
    context = system_text(messages, QA_PREFIX)
    assert "EUR 230" in context and estimate_tokens(context) <= 45
    assert estimate_tokens(context) <= sync.reports[0]["used_tokens"]
    assert [d.page_content for d in out["context"]] == [d.page_content for d in again["context"]]
    assert all("capsa_receipt" in d.metadata for d in out["context"])
    assert documents == before
    assert_accounted(sync.reports[0], retrieved=3)
    assert async_.reports == sync.reports
    assert [system_text(m, QA_PREFIX) for m in async_.sent] == [context]


def test_history_aware_retriever_packs_for_the_rewritten_question() -> None:
    from langchain_classic.chains import create_history_aware_retriever

    rewrite = ChatPromptTemplate.from_messages([
        MessagesPlaceholder("chat_history"), ("human", "{input}"),
        ("human", "Rewrite the last question to stand alone.")])
    rewriter = FakeListChatModel(responses=["What is the hotel cap in London?"])
    retriever = create_history_aware_retriever(
        rewriter, compressing(Fixed(docs=policies()), 45), rewrite)
    recorder = Recorder()
    out = qa_chain(retriever).invoke(
        {"input": "And in London?", "chat_history": [HumanMessage("What is the hotel cap?"),
                                                     AIMessage("EUR 165 a night.")]},
        config={"callbacks": [recorder]})
    [report] = recorder.reports
    assert report["query"] == HOTEL  # the rewritten question, not the follow-up
    assert any("EUR 230" in d.page_content for d in out["context"])
    answer_request = recorder.sent[-1]
    assert estimate_tokens(system_text(answer_request, QA_PREFIX)) <= 45


# -- LangChain: retrievers that merge or expand -------------------------------------------------


def test_multi_query_retriever_feeds_each_document_once_into_the_budget() -> None:
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever

    documents = policies()
    variants = FakeListChatModel(responses=["hotel cap London\nnightly hotel limit\nrail class"])
    multi = MultiQueryRetriever.from_llm(
        retriever=store_of(documents).as_retriever(search_kwargs={"k": 2}), llm=variants)
    recorder = Recorder()
    kept = BudgetedRetriever(retriever=multi, budget=Budget(max_tokens=60)).invoke(
        HOTEL, config={"callbacks": [recorder]})
    [report] = recorder.reports
    retrieved = len(report["receipts"])
    assert 1 <= retrieved <= len(documents)  # the union, each document once
    assert_accounted(report, retrieved=retrieved)
    assert estimate_tokens(format_packet.invoke(kept)) <= 60
    assert any("EUR 230" in d.page_content for d in kept)


def test_parent_document_retriever_packs_parents_and_leaves_the_docstore_alone() -> None:
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_core.stores import InMemoryStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    long = " ".join(f"Section {i}. The nightly hotel cap in city {i} is EUR {100 + i}. "
                    "Receipts are kept for seven years." for i in range(40))
    loaded = CapsaLoader([("travel.md", long.encode()),
                          ("remote.md", b"The internet stipend is EUR 30 a month.")],
                         extractor=PlainTextExtractor()).load()
    docstore = InMemoryStore()
    parents = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=32)), docstore=docstore,
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0))
    parents.add_documents(loaded)
    stored = copy.deepcopy(docstore.mget(list(docstore.yield_keys())))
    recorder = Recorder()
    kept = BudgetedRetriever(retriever=parents, budget=Budget(max_tokens=120)).invoke(
        "What is the hotel cap in city 7?", config={"callbacks": [recorder]})
    assert docstore.mget(list(docstore.yield_keys())) == stored
    assert estimate_tokens(format_packet.invoke(kept)) <= 120
    assert any("EUR 107" in d.page_content for d in kept)
    assert {d.id for d in kept} <= {d.id for d in loaded}  # the parents' own ids
    assert all(d.metadata["capsa_label"] in {"travel.md", "remote.md"} for d in kept)
    assert_accounted(recorder.reports[0], retrieved=len(recorder.reports[0]["receipts"]))


# -- LangChain: message history around an assign step --------------------------------------------


@pytest.mark.filterwarnings("ignore:.*deprecated.*:DeprecationWarning")
def test_message_history_around_an_assigned_context_packs_each_turn_under_its_tags() -> None:
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.runnables.history import RunnableWithMessageHistory

    class Tagged(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[list[str]] = []

        def on_custom_event(self, name: str, data: Any, *, run_id: UUID,
                            tags: list[str] | None = None, **kwargs: Any) -> None:
            super().on_custom_event(name, data, run_id=run_id, **kwargs)
            self.tags.append(list(tags or []))

    budgeted = BudgetedRetriever(retriever=Fixed(docs=policies()), budget=Budget(max_tokens=40))
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Context:\n{context}"), MessagesPlaceholder("history"), ("human", "{question}")])
    context = RunnableLambda(lambda inputs: inputs["question"]) | budgeted | format_packet
    chain = (RunnablePassthrough.assign(context=context).with_config(run_name="pack",
                                                                      tags=["capsa"])
             | prompt | FakeListChatModel(responses=["EUR 230.", "EUR 165."]))
    histories: dict[str, InMemoryChatMessageHistory] = {}
    with_history = RunnableWithMessageHistory(
        chain, lambda session: histories.setdefault(session, InMemoryChatMessageHistory()),
        input_messages_key="question", history_messages_key="history")
    recorder = Tagged()
    config: Any = {"configurable": {"session_id": "u1"}, "callbacks": [recorder]}
    for question in (HOTEL, "And outside London?"):
        with_history.invoke({"question": question}, config=config)
    assert [r["query"] for r in recorder.reports] == [HOTEL, "And outside London?"]
    assert all("capsa" in tags for tags in recorder.tags)
    assert [len(request) for request in recorder.sent] == [2, 4]  # the history grew
    assert all(estimate_tokens(system_text(request, "Context:\n")) <= 40
               for request in recorder.sent)
    assert [m.type for m in histories["u1"].messages] == ["human", "ai", "human", "ai"]


# -- LangChain: LangGraph state graphs -----------------------------------------------------------


class RagState(TypedDict, total=False):
    question: str
    docs: list[Document]
    packed: list[Document]
    context: str
    answer: str


def rag_graph(pack_node: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    model = FakeListChatModel(responses=["EUR 230."])
    graph = StateGraph(RagState)
    graph.add_node("retrieve", lambda state: {"docs": policies()})
    graph.add_node("pack", pack_node)
    graph.add_node("render", lambda state: {"context": format_packet.invoke(state["packed"])})
    graph.add_node("generate", lambda state: {"answer": str(model.invoke(
        f"{state['context']}\n\n{state['question']}").content)})
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "pack")
    graph.add_edge("pack", "render")
    graph.add_edge("render", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


async def test_a_state_graph_packs_node_by_node_and_reports_from_the_pack_node() -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=50))

    def pack(state: RagState, config: RunnableConfig) -> dict[str, Any]:
        return {"packed": list(compressor.compress_documents(
            state["docs"], state["question"], callbacks=config.get("callbacks")))}

    async def apack(state: RagState, config: RunnableConfig) -> dict[str, Any]:
        return {"packed": list(await compressor.acompress_documents(
            state["docs"], state["question"], callbacks=config.get("callbacks")))}

    sync, async_ = Recorder(), Recorder()
    out = rag_graph(pack).invoke({"question": HOTEL}, config={"callbacks": [sync]})
    again = await rag_graph(apack).ainvoke({"question": HOTEL}, config={"callbacks": [async_]})
    assert out["answer"] == "EUR 230." and again["context"] == out["context"]
    assert "EUR 230" in out["context"] and estimate_tokens(out["context"]) <= 50
    assert out["docs"] == policies()  # the retrieve node's documents, unchanged in state
    assert sync.reports == async_.reports and len(sync.reports) == 1
    assert_accounted(sync.reports[0], retrieved=3)
    nodes = [event["metadata"].get("langgraph_node") async for event in
             rag_graph(apack).astream_events({"question": HOTEL}, version="v2")
             if event["event"] == "on_custom_event"]
    assert nodes == ["pack"]


def test_a_compressor_called_inside_a_runnable_reports_to_the_enclosing_run() -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=200))
    # the docs' own page-shape chain calls the compressor this way
    chain = (RunnableLambda(lambda docs: compressor.compress_documents(docs, HOTEL))
             | format_packet)
    recorder = Recorder()
    chain.invoke(policies(), config={"callbacks": [recorder]})
    graph_recorder = Recorder()
    rag_graph(lambda state: {"packed": list(compressor.compress_documents(
        state["docs"], state["question"]))}).invoke(
        {"question": HOTEL}, config={"callbacks": [graph_recorder]})
    assert len(recorder.reports) == 1 and len(graph_recorder.reports) == 1
    assert compressor.compress_documents(policies(), HOTEL)  # outside any run: nobody to tell


async def test_an_async_compressor_called_inside_a_runnable_reports_to_the_enclosing_run(
        ) -> None:
    compressor = CapsaCompressor(budget=Budget(max_tokens=200))

    async def step(docs: list[Document]) -> Sequence[Document]:
        return await compressor.acompress_documents(docs, HOTEL)

    recorder = Recorder()
    await (RunnableLambda(step) | format_packet).ainvoke(policies(),
                                                         config={"callbacks": [recorder]})
    assert len(recorder.reports) == 1


class FanOut(TypedDict, total=False):
    questions: list[str]
    contexts: Annotated[list[str], operator.add]


class OneQuestion(TypedDict):
    question: str


async def test_send_fan_out_packs_each_question_in_its_own_branch() -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    budgeted = BudgetedRetriever(retriever=RunnableLambda(lambda query: policies()),
                                 budget=Budget(max_tokens=40))

    def pack(state: OneQuestion) -> dict[str, Any]:
        return {"contexts": [format_packet.invoke(budgeted.invoke(state["question"]))]}

    async def apack(state: OneQuestion) -> dict[str, Any]:
        return {"contexts": [format_packet.invoke(await budgeted.ainvoke(state["question"]))]}

    def graph(node: Any) -> Any:
        built = StateGraph(FanOut)
        built.add_node("pack", node)
        built.add_conditional_edges(
            START, lambda state: [Send("pack", {"question": q}) for q in state["questions"]],
            ["pack"])
        built.add_edge("pack", END)
        return built.compile()

    questions = [HOTEL, STIPEND, TRAINS]
    sync, async_ = Recorder(), Recorder()
    out = graph(pack).invoke({"questions": questions}, {"callbacks": [sync]})
    again = await graph(apack).ainvoke({"questions": questions}, {"callbacks": [async_]})
    assert sorted(out["contexts"]) == sorted(again["contexts"])
    assert all(estimate_tokens(c) <= 40 for c in out["contexts"])
    assert sorted(r["query"] for r in sync.reports) == sorted(questions)
    assert sorted(r["query"] for r in async_.reports) == sorted(questions)
    for report in sync.reports:
        assert_accounted(report, retrieved=3)


def test_packed_documents_in_graph_state_render_the_same_after_a_sqlite_checkpoint(
        tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    budgeted = BudgetedRetriever(retriever=RunnableLambda(lambda query: policies()),
                                 budget=Budget(max_tokens=40))

    def graph(saver: SqliteSaver) -> Any:
        built = StateGraph(RagState)
        built.add_node("pack", lambda state: {"packed": budgeted.invoke(state["question"])})
        built.add_edge(START, "pack")
        built.add_edge("pack", END)
        return built.compile(checkpointer=saver)

    path = tmp_path / "threads.sqlite"
    thread = {"configurable": {"thread_id": "user-1"}}
    with sqlite3.connect(str(path), check_same_thread=False) as connection:
        first = format_packet.invoke(
            graph(SqliteSaver(connection)).invoke({"question": HOTEL}, thread)["packed"])
    connection.close()
    with sqlite3.connect(str(path), check_same_thread=False) as connection:
        stored = graph(SqliteSaver(connection)).get_state(thread).values["packed"]
    connection.close()
    assert estimate_tokens(first) <= 40 and "EUR 230" in first
    assert format_packet.invoke(stored) == first  # compact marks and handles survive
    smaller = CapsaCompressor(budget=Budget(max_tokens=28)).compress_documents(stored, HOTEL)
    assert estimate_tokens(format_packet.invoke(smaller)) <= 28


# -- LangChain: metadata filters, empty and oversized retrievals --------------------------------


def loaded_policies() -> list[Document]:
    return CapsaLoader([("travel.md", b"# Travel\n\nThe nightly hotel cap is EUR 165. "
                         b"In London it is EUR 230."),
                        ("remote.txt", b"The internet stipend for remote workers is EUR 30."),
                        ("notes.md", b"Hotel bookings go through the travel desk.")],
                       extractor=PlainTextExtractor()).load()


def test_loader_metadata_filters_a_vector_store_search_before_packing() -> None:
    documents = loaded_policies()
    store = store_of(documents)

    def markdown(doc: Document) -> bool:
        return bool(doc.metadata["capsa_kind"] == "markdown")

    hits = store.similarity_search("hotel cap", k=10, filter=markdown)
    assert sorted(h.metadata["capsa_label"] for h in hits) == ["notes.md", "travel.md"]
    scored = BudgetedRetriever(
        retriever=ScoredRetriever(vectorstore=store, k=10, search_kwargs={"filter": markdown}),
        budget=Budget(max_tokens=200))
    recorder = Recorder()
    kept = scored.invoke(HOTEL, config={"callbacks": [recorder]})
    assert {d.metadata["capsa_label"] for d in kept} <= {"notes.md", "travel.md"}
    assert all("score" in d.metadata and "capsa_kind" in d.metadata for d in kept)
    assert_accounted(recorder.reports[0], retrieved=2)
    # "filter and the like go in search_kwargs or as invoke kwargs"
    only_remote = scored.invoke(HOTEL, filter=lambda d: d.metadata["capsa_label"] == "remote.txt")
    assert [d.metadata["capsa_label"] for d in only_remote] == ["remote.txt"]
    as_retriever = store.as_retriever(search_kwargs={"k": 10, "filter": markdown})
    kept = BudgetedRetriever(retriever=as_retriever, budget=Budget(max_tokens=200)).invoke(HOTEL)
    assert {d.metadata["capsa_label"] for d in kept} <= {"notes.md", "travel.md"}


async def test_an_empty_retrieval_sends_no_context_and_says_why_sync_and_async() -> None:
    budgeted = BudgetedRetriever(retriever=RunnableLambda(lambda query: []),
                                 budget=Budget(max_tokens=100))
    sync, async_ = Recorder(), Recorder()
    assert budgeted.invoke(HOTEL, config={"callbacks": [sync]}) == []
    assert await budgeted.ainvoke(HOTEL, config={"callbacks": [async_]}) == []
    assert format_packet.invoke([]) == ""
    assert sync.reports == async_.reports
    [report] = sync.reports
    assert (report["kept"], report["dropped"], report["emptied_by"]) == ([], [], "no_input")
    # the stock compression retriever skips the compressor on no documents: no report, no error
    recorder = Recorder()
    chain = qa_chain(compressing(RunnableLambda(lambda query: []), 100))
    assert chain.invoke({"input": HOTEL}, config={"callbacks": [recorder]})["context"] == []


def test_a_k_beyond_the_retrieval_over_id_less_documents_accounts_for_every_one() -> None:
    many = [Document(page_content=f"Rule {i}: the hotel cap in city {i} is EUR {100 + i}.")
            for i in range(300)]
    before = copy.deepcopy(many)
    recorder = Recorder()
    kept = BudgetedRetriever(retriever=RunnableLambda(lambda query: many),
                             budget=Budget(max_tokens=300), k=100_000).invoke(
        "What is the hotel cap in city 42?", config={"callbacks": [recorder]})
    [report] = recorder.reports
    assert_accounted(report, retrieved=300)
    assert estimate_tokens(format_packet.invoke(kept)) <= 300
    assert any("EUR 142" in d.page_content for d in kept)
    assert all(d.id is None for d in kept) and many == before


async def test_one_compressor_shared_by_threads_and_tasks_packs_as_it_does_alone() -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever

    documents = [Document(id=f"d{i}", page_content=text * 4, metadata={"source": f"s{i}.md"})
                 for i, text in enumerate(UNICODE_TEXTS)]
    before = copy.deepcopy(documents)
    retriever = ContextualCompressionRetriever(
        base_compressor=CapsaCompressor(budget=Budget(max_tokens=60)),
        base_retriever=RunnableLambda(lambda query: documents))
    questions = UNICODE_QUESTIONS * 4
    alone = {q: format_packet.invoke(retriever.invoke(q)) for q in UNICODE_QUESTIONS}

    def packet(question: str) -> str:
        return str(format_packet.invoke(retriever.invoke(question)))

    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(packet, questions))
    tasks = await asyncio.gather(*(retriever.ainvoke(q) for q in questions))
    assert threaded == [alone[q] for q in questions]
    assert [format_packet.invoke(t) for t in tasks] == [alone[q] for q in questions]
    assert all(estimate_tokens(p) <= 60 for p in alone.values())
    assert "230 евро" in alone["лимит на отель в Лондоне"]
    assert "東京のホテル上限" in alone["東京のホテル上限"]
    assert documents == before


# -- LangChain: two capsa middlewares in one agent ----------------------------------------------


class ToolModel(GenericFakeChatModel):
    disable_streaming: bool = True

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self


def test_attachment_and_capsule_middleware_share_an_agent_over_two_turns() -> None:
    import base64

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from capsa.capsule import EvidenceLedger
    from capsa.langchain import (
        AttachmentMiddleware,
        CitationCapsuleMiddleware,
        capsa_retriever_tool,
    )

    chunks = [Document(id="travel-1", page_content="The nightly hotel cap is EUR 230 in London.",
                       metadata={"source": "travel.pdf"}),
              Document(id="travel-2", page_content="Trains are booked in standard class.",
                       metadata={"source": "travel.pdf"}),
              Document(id="remote-1", page_content="The internet stipend is EUR 30.",
                       metadata={"source": "remote.md"})]

    def retrieve(query: str) -> list[Document]:
        words = set(query.lower().split())
        return [d for d in chunks if words & set(d.page_content.lower().split())]

    search = capsa_retriever_tool(RunnableLambda(retrieve), name="search")
    replies = [AIMessage("", tool_calls=[{"name": "search", "args": {
                   "query": "hotel cap london trains"}, "id": "c1"}]),
               AIMessage("EUR 230 [travel-1]."),
               AIMessage("", tool_calls=[{"name": "search", "args": {
                   "query": "internet stipend"}, "id": "c2"}]),
               AIMessage("EUR 30 [remote-1].")]
    agent = create_agent(ToolModel(messages=iter(replies)), tools=[search], middleware=[
        CitationCapsuleMiddleware(evidence_tools=[search]),
        AttachmentMiddleware(budget=Budget(max_tokens=200), extractor=PlainTextExtractor())],
        checkpointer=InMemorySaver())
    memo = base64.b64encode(b"Memo: the London office moves in May.").decode()
    question = HumanMessage(content=[
        {"type": "text", "text": "What is the hotel cap in London? See my memo."},
        {"type": "file", "base64": memo, "mime_type": "text/plain",
         "extras": {"filename": "memo.txt"}}])
    thread = {"configurable": {"thread_id": "t1"}}
    first, second = Recorder(), Recorder()
    agent.invoke({"messages": [question]}, {**thread, "callbacks": [first]})
    agent.invoke({"messages": [HumanMessage(STIPEND)]}, {**thread, "callbacks": [second]})
    wire = [m for request in first.sent + second.sent for m in request]
    blocks = [b for m in wire if isinstance(m.content, list) for b in m.content]
    assert not any(isinstance(b, dict) and b.get("type") == "file" for b in blocks)
    earlier_return = str(second.sent[0][2].content)
    assert earlier_return.startswith('<chunk id="travel-1"') and "Trains" not in earlier_return
    assert 'ids="travel-2"' in earlier_return
    assert "capsa.attachments" in second.events and "capsa.capsule" in second.events
    state = agent.get_state(thread).values  # type: ignore[arg-type]
    assert [b["type"] for b in state["messages"][0].content] == ["text", "file"]
    ledger = EvidenceLedger.from_json(state["capsa_ledger"])
    assert {e.evidence.chunk_id for e in ledger.entries if e.cited_in} == {"travel-1",
                                                                             "remote-1"}


# -- LlamaIndex helpers ---------------------------------------------------------------------------


class Reports(BaseEventHandler):
    seen: list[CapsaCompressionEvent] = []

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, CapsaCompressionEvent):
            self.seen.append(event)

    @classmethod
    def class_name(cls) -> str:
        return "Round3Reports"


@pytest.fixture
def reports() -> Iterator[Reports]:
    handler = Reports(seen=[])
    get_dispatcher().add_event_handler(handler)
    yield handler
    get_dispatcher().event_handlers.remove(handler)


def llm_context(nodes: list[Any]) -> str:
    """What a synthesizer sends of the nodes: their LLM content, joined by blank lines."""
    from llama_index.core.schema import MetadataMode

    return "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes)


def li_documents() -> list[Any]:
    from llama_index.core import Document as LIDocument

    return [
        LIDocument(id_="travel", text="The nightly hotel cap is EUR 165. In London it is "
                   "EUR 230. " + "Receipts are kept for seven years. " * 10,
                   metadata={"file_name": "travel.md"}),
        LIDocument(id_="rail", text="Rail travel is booked in standard class.",
                   metadata={"file_name": "rail.md"}),
        LIDocument(id_="remote", text="The internet stipend for remote workers is EUR 30 a "
                   "month. " + "Chairs are refunded once. " * 10,
                   metadata={"file_name": "remote.md"}),
    ]


def vector_index(documents: list[Any]) -> Any:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    return VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))


def capsa_engine(index: Any, max_tokens: int, **options: Any) -> Any:
    from llama_index.core.llms.mock import MockLLM

    from capsa.llama_index import CapsaNodePostprocessor

    post = CapsaNodePostprocessor(budget=Budget(max_tokens=max_tokens))
    return index.as_query_engine(llm=MockLLM(), node_postprocessors=[post], **options)


def assert_li_accounted(event: CapsaCompressionEvent, retrieved: int) -> None:
    named = event.kept + [d["id"] for d in event.dropped]
    assert len(named) == len(set(named)) == retrieved
    assert all(d["reason"] for d in event.dropped)


# -- LlamaIndex: engines over engines ------------------------------------------------------------


async def test_condense_question_chat_engine_packs_every_turns_context(
        reports: Reports, sql_memory: Any) -> None:
    from llama_index.core.chat_engine import CondenseQuestionChatEngine
    from llama_index.core.llms.mock import MockLLM

    documents = li_documents()
    before = [d.model_dump() for d in documents]
    engine = CondenseQuestionChatEngine.from_defaults(
        query_engine=capsa_engine(vector_index(documents), 50, similarity_top_k=3),
        llm=MockLLM(), memory=sql_memory(session_id="condense"))
    turns = [engine.chat(HOTEL), engine.chat("And the internet stipend?"),
             await engine.achat("Which class for trains?")]
    assert len(reports.seen) == 3
    for response, event in zip(turns, reports.seen, strict=True):
        assert estimate_tokens(llm_context(response.source_nodes)) <= 50
        assert_li_accounted(event, retrieved=3)
    # the condensed question (MockLLM echoes the condense prompt) carries the follow-up
    assert "And the internet stipend?" in reports.seen[1].query
    assert [d.model_dump() for d in documents] == before


async def test_sub_question_engine_packs_each_sub_question_for_its_own_index(
        reports: Reports) -> None:
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.query_engine import SubQuestionQueryEngine
    from llama_index.core.question_gen.types import BaseQuestionGenerator, SubQuestion
    from llama_index.core.tools import QueryEngineTool, ToolMetadata

    travel, remote = li_documents()[:2], li_documents()[2:]
    tools = [QueryEngineTool(query_engine=capsa_engine(vector_index(travel), 40),
                             metadata=ToolMetadata(name="travel", description="travel policy")),
             QueryEngineTool(query_engine=capsa_engine(vector_index(remote), 40),
                             metadata=ToolMetadata(name="remote", description="remote work"))]

    class Fixed(BaseQuestionGenerator):
        """Stands in for the LLM's question generator."""

        def generate(self, tools: Any, query: Any) -> list[SubQuestion]:
            return [SubQuestion(sub_question=HOTEL, tool_name="travel"),
                    SubQuestion(sub_question=STIPEND, tool_name="remote")]

        async def agenerate(self, tools: Any, query: Any) -> list[SubQuestion]:
            return self.generate(tools, query)

        def _get_prompts(self) -> dict[str, Any]:
            return {}

        def _update_prompts(self, prompts: Any) -> None:
            pass

    def engine(use_async: bool) -> Any:
        return SubQuestionQueryEngine.from_defaults(
            query_engine_tools=tools, question_gen=Fixed(), llm=MockLLM(),
            use_async=use_async, verbose=False)

    response = engine(False).query("Hotel cap in London and the internet stipend?")
    sync = [(e.query, e.kept, e.used_tokens) for e in reports.seen]
    reports.seen.clear()
    await engine(True).aquery("Hotel cap in London and the internet stipend?")
    assert sorted((e.query, e.kept, e.used_tokens) for e in reports.seen) == sorted(sync)
    assert [q for q, _, _ in sync] == [HOTEL, STIPEND]
    assert all(0 < used <= 40 for _, _, used in sync)
    assert "EUR 230" in str(response) and "EUR 30" in str(response)


def test_router_query_engine_packs_only_on_the_chosen_engine(reports: Reports) -> None:
    from llama_index.core.base.base_selector import BaseSelector, SelectorResult, SingleSelection
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.query_engine import RouterQueryEngine
    from llama_index.core.tools import QueryEngineTool, ToolMetadata

    travel, remote = li_documents()[:2], li_documents()[2:]
    tools = [QueryEngineTool(query_engine=capsa_engine(vector_index(travel), 40),
                             metadata=ToolMetadata(name="travel", description="travel policy")),
             QueryEngineTool(query_engine=capsa_engine(vector_index(remote), 40),
                             metadata=ToolMetadata(name="remote", description="remote work"))]

    class ByWord(BaseSelector):
        """Stands in for an LLM selector."""

        def _select(self, choices: Any, query: Any) -> SelectorResult:
            index = 1 if "stipend" in query.query_str else 0
            return SelectorResult(selections=[SingleSelection(index=index, reason="keyword")])

        async def _aselect(self, choices: Any, query: Any) -> SelectorResult:
            return self._select(choices, query)

        def _get_prompts(self) -> dict[str, Any]:
            return {}

        def _update_prompts(self, prompts: Any) -> None:
            pass

    router = RouterQueryEngine(selector=ByWord(), query_engine_tools=tools, llm=MockLLM())
    response = router.query(STIPEND)
    [event] = reports.seen
    assert event.query == STIPEND and event.used_tokens <= 40
    assert "EUR 30" in str(response) and "EUR 230" not in str(response)


# -- LlamaIndex: storage, retrievers, filters ----------------------------------------------------


def read_folder(folder: Path) -> list[Any]:
    from capsa.llama_index import CapsaDirectoryReader, CapsaReader

    (folder / "travel.md").write_text("# Travel\n\nThe nightly hotel cap is EUR 165. In London "
                                      "it is EUR 230. " + "Receipts are kept. " * 20)
    (folder / "remote.txt").write_text("The internet stipend for remote workers is EUR 30.")
    (folder / "rail.md").write_text("Rail travel is booked in standard class, 14 days ahead.")
    return list(CapsaDirectoryReader(
        folder, reader=CapsaReader(extractor=PlainTextExtractor())).load_data())


def test_an_index_loaded_from_storage_keeps_capsa_metadata_out_of_the_prompt(
        tmp_path: Path, reports: Reports) -> None:
    from llama_index.core import StorageContext, load_index_from_storage
    from llama_index.core.embeddings import MockEmbedding

    (tmp_path / "inbox").mkdir()
    documents = read_folder(tmp_path / "inbox")
    vector_index(documents).storage_context.persist(str(tmp_path / "store"))
    loaded = load_index_from_storage(StorageContext.from_defaults(
        persist_dir=str(tmp_path / "store")), embed_model=MockEmbedding(embed_dim=8))
    response = capsa_engine(loaded, 60, similarity_top_k=5).query(HOTEL)
    context = llm_context(response.source_nodes)
    assert "EUR 230" in context and estimate_tokens(context) <= 60
    assert "capsa_sha256" not in str(response) and "capsa_receipt" not in str(response)
    assert str(tmp_path) not in str(response)  # hide_paths: file_path stays on the server
    [event] = reports.seen
    assert_li_accounted(event, retrieved=3)


async def test_a_filtered_retriever_with_a_large_top_k_then_the_postprocessor_on_a_bundle(
        tmp_path: Path) -> None:
    from llama_index.core.schema import QueryBundle
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters

    from capsa.llama_index import CapsaNodePostprocessor

    retriever = vector_index(read_folder(tmp_path)).as_retriever(
        similarity_top_k=1000,
        filters=MetadataFilters(filters=[MetadataFilter(key="capsa_kind", value="markdown")]))
    nodes = retriever.retrieve("hotel cap")
    assert sorted(n.node.metadata["file_name"] for n in nodes) == ["rail.md", "travel.md"]
    before = [n.model_dump() for n in nodes]
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=40))
    bundle = QueryBundle(HOTEL)
    kept = post.postprocess_nodes(nodes, query_bundle=bundle)
    akept = await post.apostprocess_nodes(nodes, query_bundle=bundle)
    assert [n.model_dump() for n in akept] == [n.model_dump() for n in kept]
    assert [n.model_dump() for n in nodes] == before
    assert "EUR 230" in llm_context(kept) and estimate_tokens(llm_context(kept)) <= 40
    assert all(n.node.metadata["capsa_kind"] == "markdown" for n in kept)
    assert post.postprocess_nodes([], query_bundle=bundle) == []
    assert await post.apostprocess_nodes([], query_bundle=bundle) == []


@pytest.mark.parametrize("kind", ["keyword_table", "document_summary"])
def test_indexes_that_give_no_scores_feed_the_postprocessor(kind: str, reports: Reports
                                                           ) -> None:
    from llama_index.core import DocumentSummaryIndex, SimpleKeywordTableIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms.mock import MockLLM

    documents = li_documents()
    index: Any = (SimpleKeywordTableIndex.from_documents(documents, llm=MockLLM())
                  if kind == "keyword_table" else
                  DocumentSummaryIndex.from_documents(
                      documents, llm=MockLLM(max_tokens=10),
                      embed_model=MockEmbedding(embed_dim=8), show_progress=False))
    # MockEmbedding ties every summary: fetch all three so the hotel's is among them
    options = {} if kind == "keyword_table" else {"similarity_top_k": 3}
    response = capsa_engine(index, 40, **options).query(HOTEL)
    assert response.source_nodes and all(n.score is None for n in response.source_nodes)
    assert "EUR 230" in llm_context(response.source_nodes)
    assert estimate_tokens(llm_context(response.source_nodes)) <= 40
    [event] = reports.seen
    assert_li_accounted(event, retrieved=len(event.kept) + len(event.dropped))


async def test_one_postprocessor_shared_by_threads_and_tasks_packs_as_it_does_alone() -> None:
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from capsa.llama_index import CapsaNodePostprocessor

    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=text * 4,
                                         metadata={"file_name": f"f{i}.md"}), score=0.5)
             for i, text in enumerate(UNICODE_TEXTS)]
    before = [n.model_dump() for n in nodes]
    post = CapsaNodePostprocessor(budget=Budget(max_tokens=60))

    def packed(question: str) -> list[tuple[str, str]]:
        kept = post.postprocess_nodes(nodes, query_bundle=QueryBundle(question))
        return [(n.node.node_id, n.node.get_content()) for n in kept]

    alone = {q: packed(q) for q in UNICODE_QUESTIONS}
    questions = UNICODE_QUESTIONS * 4
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(packed, questions))
    tasks = await asyncio.gather(*(post.apostprocess_nodes(nodes, query_bundle=QueryBundle(q))
                                   for q in questions))
    assert threaded == [alone[q] for q in questions]
    assert [[(n.node.node_id, n.node.get_content()) for n in t] for t in tasks] == [
        alone[q] for q in questions]
    for question in UNICODE_QUESTIONS:
        kept = post.postprocess_nodes(nodes, query_bundle=QueryBundle(question))
        assert estimate_tokens(llm_context(kept)) <= 60
    assert [n.model_dump() for n in nodes] == before


def test_budget_for_llm_with_the_compact_synthesizers_padding_is_answered_in_one_call(
        ) -> None:
    from llama_index.core import Document as LIDocument
    from llama_index.core import Settings
    from llama_index.core.base.llms.types import ChatMessage, LLMMetadata
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT

    from capsa.llama_index import CapsaNodePostprocessor, budget_for_llm

    class Window(MockLLM):
        """A 2,000-token model that counts its calls."""

        calls: Any = None

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=2000, num_output=48, is_chat_model=False)

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            self.calls.append(prompt)
            return super().complete(prompt, formatted=formatted, **kwargs)

    documents = [LIDocument(id_=f"d{i}", text=f"Section {i}. " + " ".join(
        f"In city {i * 40 + j} the nightly hotel cap is EUR {100 + j}." for j in range(40)),
        metadata={"file_name": f"policy-{i}.md"}) for i in range(4)]
    index = vector_index(documents)
    question = "What is the nightly hotel cap in city 23?"
    count = Settings.tokenizer
    calls: dict[int, int] = {}
    for margin in (0, 500):  # 500: CompactAndRefine's response_padding_size
        llm = Window(max_tokens=5)
        llm.calls = []
        budget = budget_for_llm(llm, prompt_template=DEFAULT_TEXT_QA_PROMPT,
                                chat_history=[ChatMessage(role="user", content=question)],
                                tokenizer=count, margin_tokens=margin)
        engine = index.as_query_engine(llm=llm, similarity_top_k=4, node_postprocessors=[
            CapsaNodePostprocessor(budget=budget, tokenizer=count)])
        engine.query(question)
        assert all(len(count(prompt)) <= 2000 - 48 for prompt in llm.calls)
        calls[margin] = len(llm.calls)
    # the whole-window budget fits the window, yet `compact` reserves 500 more and refines
    assert calls == {0: 2, 500: 1}


# -- LlamaIndex: a multi-agent workflow over one CapsuleMemory -----------------------------------


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
async def test_agent_workflow_handoffs_share_one_capsule_memory() -> None:
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
    from llama_index.core.base.base_retriever import BaseRetriever as LIRetriever
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.memory import ChatMemoryBuffer
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from capsa.llama_index import (
        CapsuleMemory,
        capsule_cite_tool,
        capsule_recall_tool,
        capsule_retriever_tool,
    )

    nodes = {key: TextNode(id_=key, text=text, metadata={"title": key.title()})
             for key, text in {"hotel": "The hotel cap is EUR 230 in London.",
                               "rail": "Trains are booked in standard class.",
                               "wifi": "The internet stipend is EUR 30 a month."}.items()}

    class Lookup(LIRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            first = "hotel" if "hotel" in query_bundle.query_str else "wifi"
            return [NodeWithScore(node=nodes[first], score=0.9),
                    NodeWithScore(node=nodes["rail"], score=0.4)]

    class Script:
        def __init__(self) -> None:
            self.replies: list[ChatMessage] = []
            self.seen: list[list[ChatMessage]] = []

        def __call__(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
            self.seen.append([m.model_copy(deep=True) for m in messages])
            return self.replies.pop(0)

    def call(call_id: str, tool: str, arguments: dict[str, Any]) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[  # type: ignore[arg-type]
            ToolCallBlock(tool_call_id=call_id, tool_name=tool, tool_kwargs=arguments)])

    researcher_llm, writer_llm = Script(), Script()
    researcher = FunctionAgent(
        name="researcher", description="searches the policies",
        tools=[capsule_retriever_tool(Lookup(), name="search"), capsule_cite_tool(),
               capsule_recall_tool()],
        llm=MockFunctionCallingLLM(response_generator=researcher_llm),
        can_handoff_to=["writer"], streaming=False)
    writer = FunctionAgent(name="writer", description="writes the answer", tools=[],
                           llm=MockFunctionCallingLLM(response_generator=writer_llm),
                           streaming=False)
    workflow = AgentWorkflow(agents=[researcher, writer], root_agent="researcher")
    memory = CapsuleMemory.from_defaults(ChatMemoryBuffer.from_defaults(token_limit=100_000))

    researcher_llm.replies = [call("s1", "search", {"query": "hotel cap"}),
                              call("c1", "cite", {"chunk_ids": ["hotel"]}),
                              call("h1", "handoff", {"to_agent": "writer", "reason": "write"})]
    writer_llm.replies = [ChatMessage(role=MessageRole.ASSISTANT, content="EUR 230 [hotel].")]
    assert str(await workflow.run(user_msg=HOTEL, memory=memory)) == "EUR 230 [hotel]."
    stored = copy.deepcopy(memory.get_all())

    researcher_llm.replies = [call("s2", "search", {"query": "internet stipend"}),
                              call("h2", "handoff", {"to_agent": "writer", "reason": "write"})]
    writer_llm.replies = [ChatMessage(role=MessageRole.ASSISTANT, content="EUR 30 [wifi].")]
    seen_before = len(researcher_llm.seen)
    await workflow.run(user_msg=STIPEND, memory=memory)
    after = memory.get_all()
    assert [m.model_dump() for m in after[:len(stored)]] == [m.model_dump() for m in stored]
    request = researcher_llm.seen[seen_before]  # the second question's first request
    returns = [m.content or "" for m in request if m.role == MessageRole.TOOL]
    assert returns[0].startswith('<chunk id="hotel"') and "Trains" not in returns[0]
    assert 'ids="rail"' in returns[0]
    assert not any(r.startswith("Recorded 1 citation") for r in returns)  # cite left the view
    assert memory.ledger.cited_ids(0) == ("hotel",)
    assert {e.evidence.chunk_id for e in memory.ledger.entries} == {"hotel", "rail", "wifi"}
