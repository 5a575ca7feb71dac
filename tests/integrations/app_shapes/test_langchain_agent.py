"""A `create_agent` RAG agent with capsa's middleware, over several turns, as users build it.

A vector store's retriever wrapped by `capsa_retriever_tool` (whole, or budgeted),
`CitationCapsuleMiddleware`, an `InMemorySaver` thread and a scripted fake
tool-calling model; run with ``invoke``, ``ainvoke`` and ``astream``, and
statelessly with the caller's own history. The documents are what loaders and
splitters leave: no ids, metadata of every JSON type.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from capsa.budget import estimate_tokens
from capsa.capsule import EvidenceLedger
from capsa.langchain import CitationCapsuleMiddleware, capsa_retriever_tool

QUESTIONS = ["What is the hotel cap in London?", "How much is the internet stipend?",
             "Which class are trains booked in?"]


def corpus() -> list[Document]:
    return [
        Document(page_content="The nightly hotel cap is EUR 165. In London it is EUR 230.",
                 metadata={"source": "/srv/policies/travel.pdf", "page_label": "3",
                           "tags": ["travel"], "reviewed": {"by": "ops", "on": None}}),
        Document(page_content="Rail travel is booked in standard class, 14 days ahead.",
                 metadata={"source": "travel.pdf", "version": 3, "owner": None}),
        Document(page_content="The internet stipend for remote workers is EUR 30 a month.",
                 metadata={"source": "remote-work.md", "title": "Remote work"}),
        Document(page_content="", metadata={"source": "empty.md"}),
    ]


class ScriptedModel(GenericFakeChatModel):
    """Plays scripted replies, records each request, never streams (a fake cannot stream calls)."""

    disable_streaming: bool = True
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        self._seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def script(queries: list[str]) -> list[AIMessage]:
    """Per question: search, then answer."""
    replies = []
    for n, query in enumerate(queries):
        replies.append(AIMessage("", tool_calls=[
            {"name": "search", "args": {"query": query}, "id": f"call-{n}"}]))
        replies.append(AIMessage(f"Answer {n}."))
    return replies


def agent_for(search: BaseTool, model: ScriptedModel, **options: Any) -> Any:
    return create_agent(model, tools=[search],
                        middleware=[CitationCapsuleMiddleware(evidence_tools=[search])],
                        **options)


def search_over(documents: list[Document], **options: Any) -> BaseTool:
    store = InMemoryVectorStore.from_documents(documents, DeterministicFakeEmbedding(size=32))
    return capsa_retriever_tool(store.as_retriever(search_kwargs={"k": 4}), name="search",
                                **options)


def tool_returns(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_three_turn_agent_over_a_vector_store_stores_every_return_whole() -> None:
    documents = corpus()
    before = copy.deepcopy(documents)
    model = ScriptedModel(messages=iter(script(QUESTIONS)))
    agent = agent_for(search_over(documents), model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for question in QUESTIONS:
        agent.invoke({"messages": [HumanMessage(question)]}, config)
    state = agent.get_state(config).values
    returns = tool_returns(state["messages"])
    assert [r.status for r in returns] == ["success"] * 3
    assert all("EUR 230" in r.content for r in returns)  # the store keeps every return whole
    assert len(model._seen) == 6
    ledger = EvidenceLedger.from_json(state["capsa_ledger"])
    assert len(ledger.questions) == 3
    assert documents == before


async def test_three_turn_agent_runs_the_same_under_ainvoke_and_astream() -> None:
    config = {"configurable": {"thread_id": "t"}}
    search = search_over(corpus())  # one store: it gives id-less documents random ids
    sync_model = ScriptedModel(messages=iter(script(QUESTIONS)))
    sync_agent = agent_for(search, sync_model, checkpointer=InMemorySaver())
    for question in QUESTIONS:
        sync_agent.invoke({"messages": [HumanMessage(question)]}, config)

    async_model = ScriptedModel(messages=iter(script(QUESTIONS)))
    async_agent = agent_for(search, async_model, checkpointer=InMemorySaver())
    await async_agent.ainvoke({"messages": [HumanMessage(QUESTIONS[0])]}, config)
    async for _ in async_agent.astream({"messages": [HumanMessage(QUESTIONS[1])]}, config,
                                       stream_mode="updates"):
        pass
    streamed = [chunk async for chunk in async_agent.astream(
        {"messages": [HumanMessage(QUESTIONS[2])]}, config, stream_mode="messages")]
    assert any(getattr(message, "content", None) == "Answer 2." for message, _ in streamed)
    assert [[m.content for m in request] for request in async_model._seen] == [
        [m.content for m in request] for request in sync_model._seen]


def test_budgeted_search_returns_stay_within_the_tools_budget_every_turn() -> None:
    documents = [Document(page_content=f"Rule {n}: the hotel cap in city {n} is EUR {100 + n}. "
                          "Receipts are kept for seven years.", metadata={"n": n, "city": None})
                 for n in range(40)]
    model = ScriptedModel(messages=iter(script(QUESTIONS)))
    agent = agent_for(search_over(documents, budget=120), model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for question in QUESTIONS:
        agent.invoke({"messages": [HumanMessage(question)]}, config)
    returns = tool_returns(agent.get_state(config).values["messages"])
    assert len(returns) == 3
    assert all(estimate_tokens(r.content) <= 120 for r in returns)


def test_stateless_agent_leaves_the_callers_history_as_it_was() -> None:
    history: list[BaseMessage] = [HumanMessage(QUESTIONS[0]), AIMessage("EUR 230 a night."),
                                  HumanMessage(QUESTIONS[1])]
    before = [(type(m), m.content) for m in history]
    model = ScriptedModel(messages=iter(script(["stipend"])))
    out = agent_for(search_over(corpus()), model).invoke({"messages": history})
    # LangGraph's add_messages gives the caller's messages ids in place; capsa adds nothing.
    assert [(type(m), m.content) for m in history] == before
    assert len(out["messages"]) == len(history) + 3 and out["capsa_ledger"]


@pytest.mark.parametrize("metadata", [
    {"title": ["Travel", "Policy"]},
    {"title": 2024},
    {"collection": 7},
    {"collection": {"name": "policies"}},
    {"source": {"bucket": "s3", "key": "travel.pdf"}, "title": None},
], ids=["list-title", "int-title", "int-collection", "dict-collection", "dict-source"])
def test_search_over_documents_with_non_string_labels_succeeds(metadata: dict[str, Any]) -> None:
    documents = [Document(page_content="The nightly hotel cap in London is EUR 230.",
                          metadata=metadata)]
    before = copy.deepcopy(documents)
    model = ScriptedModel(messages=iter(script(["hotel cap"])))
    out = agent_for(search_over(documents), model).invoke(
        {"messages": [HumanMessage(QUESTIONS[0])]})
    [returned] = tool_returns(out["messages"])
    assert returned.status == "success" and "EUR 230" in returned.content
    assert documents == before


def test_one_picture_reference_given_as_text_is_one_reference() -> None:
    from capsa.langchain.capsule_conversion import evidence_of

    found = evidence_of(Document(page_content="See the floor plan.",
                                 metadata={"picture_refs": "fig-1.png", "title": 7}))
    assert found is not None
    assert found.picture_refs == ("fig-1.png",) and found.title == "7"
