"""Citation capsules in LangChain agents, context edits and chains, over the sample corpus."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sqlite3
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import PrivateAttr

from capsa.capsule import Evidence, EvidenceLedger, estimate_tokens
from capsa.demo.corpus_source import DOCUMENTS, QUESTIONS
from capsa.errors import BudgetError, CompactionRefused
from capsa.langchain.middleware import (
    DEFAULT_VIEW_TOKENS,
    LEDGER_KEY,
    VIEW_SHARE,
    CitationCapsuleEdit,
    CitationCapsuleMiddleware,
    capsa_retriever_tool,
    capsule_messages,
    cite_tool,
)

# -- the corpus as retrievable chunks -----------------------------------------------------------


def _chunks() -> list[Document]:
    """Every paragraph of every document, headings folded into the paragraph after them."""
    chunks: list[Document] = []
    for doc in DOCUMENTS:
        stem = doc.name.rsplit(".", 1)[0]
        heading = ""
        for block in doc.text.split("\n\n"):
            if len(block) < 80:
                heading = f"{heading}\n{block}".strip()
                continue
            text = f"{heading}\n{block}".strip()
            heading = ""
            digest = hashlib.sha256(text.encode()).hexdigest()[:8]
            chunk_id = f"{stem}-{len([c for c in chunks if c.metadata['source'] == doc.name]):02d}"
            chunks.append(
                Document(
                    page_content=text,
                    id=f"{chunk_id}-{digest}",
                    metadata={"title": doc.title, "source": doc.name, "document_id": doc.name},
                )
            )
    return chunks


CHUNKS = _chunks()
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = {"the", "and", "for", "what", "how", "who", "which", "does", "with", "much", "many"}


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class LexicalRetriever(BaseRetriever):
    """Top-k chunks by shared query terms; ties broken by id, so results are fixed."""

    k: int = 3

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        wanted = _terms(query)
        scored = sorted(CHUNKS, key=lambda d: (-len(wanted & _terms(d.page_content)), d.id))
        return scored[: self.k]


def _answer_chunk(question) -> Document:
    return next(d for d in CHUNKS if question.answer in d.page_content)


class ScriptedModel(GenericFakeChatModel):
    """Plays scripted replies and remembers every message list it was sent."""

    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def seen(self) -> list[list[BaseMessage]]:
        return self._seen

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self._seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self._seen.append(list(messages))
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _search(call_id: str, query: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "search", "args": {"query": query}, "id": call_id}])


def _cite(call_id: str, *ids: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "cite", "args": {"chunk_ids": list(ids)}, "id": call_id}]
    )


SEARCH = capsa_retriever_tool(LexicalRetriever(), name="search")
CONFIG = {"configurable": {"thread_id": "northwind"}}


def _ask(path, question: str, script: list[AIMessage], **middleware_options: Any):
    """One question in a fresh process: new connection, new agent, same thread."""
    connection = sqlite3.connect(str(path), check_same_thread=False)
    try:
        model = ScriptedModel(messages=iter(script))
        middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH], **middleware_options)
        agent = create_agent(
            model, tools=[SEARCH], middleware=[middleware], checkpointer=SqliteSaver(connection)
        )
        agent.invoke({"messages": [HumanMessage(question)]}, CONFIG)
        return model.seen, agent.get_state(CONFIG).values
    finally:
        connection.close()


def _tool_contents(messages, name="search"):
    return [m.content for m in messages if isinstance(m, ToolMessage) and m.name == name]


def _is_receipt(text: str) -> bool:
    return text.startswith("<not-shown")


# -- the five-question conversation ---------------------------------------------------------------

HOTEL, HOLD, SCANNER, STIPEND = (
    QUESTIONS[0],  # hotel cap, travel policy
    QUESTIONS[4],  # litigation hold, retention schedule
    QUESTIONS[5],  # barcode scanner, price list
    QUESTIONS[14],  # internet stipend, remote work
)


def test_five_question_conversation_through_sqlite_checkpoints(tmp_path):
    path = tmp_path / "threads.sqlite"
    hotel, hold, stipend = _answer_chunk(HOTEL), _answer_chunk(HOLD), _answer_chunk(STIPEND)
    for question, chunk in ((HOTEL, hotel), (HOLD, hold), (STIPEND, stipend)):
        assert chunk in LexicalRetriever().invoke(question.question), question
    others = [d for d in LexicalRetriever().invoke(HOTEL.question) if d.id != hotel.id]
    late = others[0]

    # Q1: retrieve, cite, answer.
    seen, state = _ask(
        path,
        HOTEL.question,
        [
            _search("q1-s", HOTEL.question),
            _cite("q1-c", hotel.id),
            AIMessage(f"EUR 230 [{hotel.id}]."),
        ],
    )
    assert [type(m) for m in seen[0]] == [HumanMessage]
    assert hotel.page_content in seen[1][-1].content  # live evidence while answering Q1

    # Q2: Q1's return shows its cited chunk whole and names the rest; a damaged id is repaired.
    damaged = hold.id[:-1]
    seen, state = _ask(
        path,
        HOLD.question,
        [_search("q2-s", HOLD.question), _cite("q2-c", damaged), AIMessage("Renata Duarte.")],
    )
    (q1_return,) = _tool_contents(seen[0])
    assert hotel.page_content in q1_return
    assert all(d.page_content not in q1_return and d.id in q1_return for d in others)
    assert _tool_contents(seen[2], "cite")[-1] == f"Recorded 1 citation: {hold.id}."
    q2_view = seen[-1]

    # Q3: a follow-up answered from earlier evidence; the wire up to Q2 is unchanged.
    seen, state = _ask(
        path,
        "Remind me, what was that hotel cap again?",
        [_cite("q3-c", hotel.id), AIMessage(f"Still EUR 230 [{hotel.id}].")],
    )
    boundary = len(q2_view) - 5  # Q2's question, search call, return, cite call, ack
    assert seen[0][:boundary] == q2_view[:boundary]
    q1_return, q2_return = _tool_contents(seen[0])
    assert hold.page_content in q2_return
    assert _tool_contents(seen[1], "cite")[-1] == f"Recorded 1 citation: {hotel.id}."

    # Q4: a late citation: a chunk Q1 retrieved but did not cite is recalled, then cited.
    seen, state = _ask(
        path,
        "What else did the travel policy say?",
        [_recall("q4-r", late.id), _cite("q4-c", late.id), AIMessage(f"Also [{late.id}].")],
    )
    assert late.page_content in _tool_contents(seen[1], "recall")[-1]
    assert _tool_contents(seen[2], "cite")[-1] == f"Recorded 1 citation: {late.id}."

    # Q5: the recalled chunk stays visible where Q4 recalled it; Q1's wire form never moved.
    seen, state = _ask(
        path,
        STIPEND.question,
        [_search("q5-s", STIPEND.question), _cite("q5-c", stipend.id), AIMessage("EUR 30.")],
    )
    assert _tool_contents(seen[0])[0] == q1_return
    assert late.page_content in _tool_contents(seen[0], "recall")[0]
    assert stipend.page_content in _tool_contents(seen[1])[-1]

    # What was stored: the real history, every tool call answered, and the ledger.
    stored = state["messages"]
    for message in stored:
        if isinstance(message, ToolMessage) and message.name == "search":
            assert (
                message.content
                == SEARCH.invoke(
                    {
                        "type": "tool_call",
                        "name": "search",
                        "args": {"query": _query(stored, message)},
                        "id": "x",
                    }
                ).content
            )
    calls = [c["id"] for m in stored if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == [m.tool_call_id for m in stored if isinstance(m, ToolMessage)]
    ledger = EvidenceLedger.from_json(state[LEDGER_KEY])
    assert not ledger.in_progress
    assert ledger.ended_at == len(stored)
    questions = [i for i, m in enumerate(stored) if isinstance(m, HumanMessage)]
    assert ledger.questions == tuple(questions)
    assert ledger.cited_ids(questions[3]) == (late.id,)
    assert ledger.cited_ids(questions[2]) == (hotel.id,)


def _query(stored, message):
    return next(
        c["args"]["query"]
        for m in stored
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["id"] == message.tool_call_id
    )


def _recall(call_id: str, *ids: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "recall", "args": {"chunk_ids": list(ids)}, "id": call_id}]
    )


def test_a_chunk_searched_again_is_sent_as_a_reference_and_stored_whole(tmp_path):
    path = tmp_path / "threads.sqlite"
    hotel = _answer_chunk(HOTEL)
    script = [_search("q1-s", HOTEL.question), _cite("q1-c", hotel.id), AIMessage("EUR 230.")]
    _ask(path, HOTEL.question, script)
    seen, state = _ask(
        path,
        "Is the hotel cap the same in every city?",
        [_search("q2-s", HOTEL.question), _cite("q2-c", hotel.id), AIMessage("Yes, EUR 230.")],
    )
    first, current = _tool_contents(seen[1])  # the request after Q2's search
    assert hotel.page_content in first
    assert f'<chunk id="{hotel.id}" shown="earlier"/>' in current
    assert hotel.page_content not in current
    others = [d for d in LexicalRetriever().invoke(HOTEL.question) if d.id != hotel.id]
    assert all(d.page_content in current for d in others)  # receipted in Q1, whole again now
    assert hotel.page_content in _tool_contents(state["messages"])[1]  # stored as returned


async def test_async_agent_compacts_through_awrap_model_call():
    saver = InMemorySaver()
    hotel = _answer_chunk(HOTEL)
    middleware = CitationCapsuleMiddleware(evidence_tools=["search"])
    first = ScriptedModel(
        messages=iter([_search("a1", HOTEL.question), AIMessage(f"EUR 230 [{hotel.id}]")])
    )
    agent = create_agent(first, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    await agent.ainvoke({"messages": [HumanMessage(HOTEL.question)]}, CONFIG)
    second = ScriptedModel(messages=iter([AIMessage("Noted.")]))
    agent = create_agent(second, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    await agent.ainvoke({"messages": [HumanMessage("thanks")]}, CONFIG)
    (earlier,) = _tool_contents(second.seen[0])
    assert hotel.page_content in earlier and "<not-shown" in earlier
    stored = (await agent.aget_state(CONFIG)).values["messages"]
    assert "<not-shown" not in _tool_contents(stored)[0]


def test_resumed_question_keeps_its_identity_after_an_error():
    saver = InMemorySaver()
    middleware = CitationCapsuleMiddleware(evidence_tools=["search"])
    hotel = _answer_chunk(HOTEL)

    class Failing(ScriptedModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            if len(self.seen) == 1:
                self._seen.append(list(messages))
                raise RuntimeError("provider outage")
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    broken = Failing(messages=iter([_search("r1", HOTEL.question)]))
    agent = create_agent(broken, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    with pytest.raises(RuntimeError, match="provider outage"):
        agent.invoke({"messages": [HumanMessage(HOTEL.question)]}, CONFIG)
    assert EvidenceLedger.from_json(agent.get_state(CONFIG).values[LEDGER_KEY]).in_progress

    retry = ScriptedModel(messages=iter([AIMessage(f"EUR 230 [{hotel.id}]")]))
    agent = create_agent(retry, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("please try again")]}, CONFIG)
    # The retry belongs to the same question: its retrieval is still live evidence.
    assert hotel.page_content in _tool_contents(retry.seen[0])[0]
    ledger = EvidenceLedger.from_json(agent.get_state(CONFIG).values[LEDGER_KEY])
    assert ledger.question == 0
    assert ledger.cited_ids(0) == (hotel.id,)


def test_middleware_adopts_a_thread_that_began_without_it():
    saver = InMemorySaver()
    plain = ScriptedModel(messages=iter([_search("p1", HOTEL.question), AIMessage("EUR 230")]))
    agent = create_agent(plain, tools=[SEARCH], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage(HOTEL.question)]}, CONFIG)
    model = ScriptedModel(messages=iter([AIMessage("ok")]))
    middleware = CitationCapsuleMiddleware(evidence_tools=["search"])
    agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("follow-up")]}, CONFIG)
    (earlier,) = _tool_contents(model.seen[0])
    ids = [d.id for d in LexicalRetriever().invoke(HOTEL.question)]
    assert _is_receipt(earlier)
    assert all(i in earlier for i in ids)  # named, so recall can bring them back


class _PictureRetriever(BaseRetriever):
    """One chunk whose figure is a picture (``picture_refs``)."""

    def _get_relevant_documents(self, query, *, run_manager):
        return [
            Document(
                page_content="Closure dates are shown in the figure.",
                id="notice-figure-0001",
                metadata={"title": "Office Notice", "picture_refs": ["#/pictures/0"]},
            )
        ]


def test_middleware_reattaches_cited_pictures_and_reports_the_compaction():
    saver = InMemorySaver()
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8

    search = capsa_retriever_tool(_PictureRetriever(), name="search", collection="notices")
    events: list[dict[str, Any]] = []

    class Listener(BaseCallbackHandler):
        def on_custom_event(self, name, data, **kwargs):
            if name == "capsa.capsule":
                events.append(data)

    middleware = CitationCapsuleMiddleware(evidence_tools=[search], fetch_picture=lambda p: png)
    first = ScriptedModel(
        messages=iter([_search("f1", "closures"), AIMessage("See [notice-figure-0001].")])
    )
    agent = create_agent(first, tools=[search], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("closures?")]}, CONFIG)
    second = ScriptedModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(second, tools=[search], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("and?")]}, {**CONFIG, "callbacks": [Listener()]})
    view = second.seen[0]
    assert [type(m) for m in view] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        HumanMessage,
        AIMessage,
        HumanMessage,
    ]
    label, image = view[3].content
    assert "[notice-figure-0001]" in label["text"] and '"notices"' in label["text"]
    assert image["type"] == "image" and image["mime_type"] == "image/png"
    stored = agent.get_state(CONFIG).values["messages"]
    assert [m.content for m in stored if isinstance(m, HumanMessage)] == ["closures?", "and?"]
    assert events[-1]["attached_pictures"] == ["#/pictures/0"]
    assert events[-1]["shown"] == ["notice-figure-0001"]


def test_middleware_records_native_citation_annotations():
    saver = InMemorySaver()
    hotel = _answer_chunk(HOTEL)
    quote = HOTEL.answer
    annotated = AIMessage(
        content=[
            {
                "type": "text",
                "text": "The cap is EUR 230.",
                "annotations": [{"type": "citation", "cited_text": f"{quote}"}],
            }
        ]
    )
    model = ScriptedModel(messages=iter([_search("n1", HOTEL.question), annotated]))
    middleware = CitationCapsuleMiddleware(evidence_tools=["search"], cite_tool_name=None)
    agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage(HOTEL.question)]}, CONFIG)
    ledger = EvidenceLedger.from_json(agent.get_state(CONFIG).values[LEDGER_KEY])
    assert ledger.cited_ids(0) == (hotel.id,)
    assert [t.name for t in middleware.tools] == ["recall"]


def test_middleware_requires_an_evidence_tool():
    with pytest.raises(ValueError, match="at least one evidence tool"):
        CitationCapsuleMiddleware(evidence_tools=[])


# -- tools -------------------------------------------------------------------------------------


def test_retriever_tool_shows_ids_and_returns_stamped_documents():
    message = SEARCH.invoke(
        {"type": "tool_call", "name": "search", "args": {"query": HOTEL.question}, "id": "t1"}
    )
    assert isinstance(message, ToolMessage)
    docs = message.artifact
    assert [d.id for d in docs] == [d.id for d in LexicalRetriever().invoke(HOTEL.question)]
    assert all(d.metadata["capsa_chunk_id"] == d.id for d in docs)
    assert message.content.startswith(f'<chunk id="{docs[0].id}" title="')
    assert docs[0].page_content in message.content


def test_retriever_tool_gives_documents_without_ids_a_stable_id():
    class Anonymous(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [Document(page_content="no id here", metadata={"source": "a.md"})]

    tool = capsa_retriever_tool(Anonymous(), collection="misc")
    call = {"type": "tool_call", "name": tool.name, "args": {"query": "x"}, "id": "t1"}
    first, second = tool.invoke(call).artifact[0], tool.invoke(call).artifact[0]
    assert first.id == second.id and len(first.id) == 16
    assert first.metadata["collection"] == "misc"


async def test_retriever_tool_has_an_async_path():
    message = await SEARCH.ainvoke(
        {"type": "tool_call", "name": "search", "args": {"query": HOLD.question}, "id": "t1"}
    )
    assert _answer_chunk(HOLD).id in message.content


def test_cite_tool_is_named_and_takes_chunk_ids():
    tool = cite_tool("declare")
    assert tool.name == "declare"
    assert list(tool.args) == ["chunk_ids"]


# -- context edit and chain step -------------------------------------------------------------------


def _history_and_ledger():
    hotel = _answer_chunk(HOTEL)
    docs = LexicalRetriever().invoke(HOTEL.question)
    history: list[BaseMessage] = [
        HumanMessage(HOTEL.question),
        _search("h1", HOTEL.question),
        ToolMessage("full results", tool_call_id="h1", name="search", artifact=docs),
        AIMessage(f"EUR 230 [{hotel.id}]"),
        HumanMessage("follow-up"),
    ]
    evidence = [
        Evidence(chunk_id=d.id, content=d.page_content, document_id=d.metadata["source"])
        for d in docs
    ]
    ledger = EvidenceLedger().begin_question(0).record_retrieval(evidence, tool="search")
    ledger = ledger.record_citations([hotel.id]).end_question(4).begin_question(4)
    return history, ledger, hotel


def test_capsule_messages_compacts_a_copy():
    history, ledger, hotel = _history_and_ledger()
    before = [m.model_copy(deep=True) for m in history]
    view = capsule_messages(history, ledger=ledger, evidence_tools=["search"])
    assert hotel.page_content in view[2].content
    assert view[2].artifact == history[2].artifact
    assert history == before
    assert view[0] is history[0] and view[4] is history[4]


def test_capsule_messages_without_messages_is_a_runnable_reading_the_ledger_each_call():
    history, ledger, hotel = _history_and_ledger()
    current = {"ledger": None}
    step = capsule_messages(ledger=lambda: current["ledger"], evidence_tools=["search"])
    with pytest.raises(CompactionRefused):
        step.invoke(history)
    current["ledger"] = ledger
    assert hotel.page_content in step.invoke(history)[2].content


def test_capsule_edit_rewrites_in_place_inside_context_editing():
    history, ledger, hotel = _history_and_ledger()
    edit = CitationCapsuleEdit(ledger=ledger, evidence_tools=["search"])
    clear = ClearToolUsesEdit(trigger=0, keep=0, exclude_tools=["search"])
    ContextEditingMiddleware(edits=[edit, clear])  # accepted as a ContextEdit
    messages = list(history)
    edit.apply(messages, count_tokens=count_tokens_approximately)
    assert hotel.page_content in messages[2].content
    assert history[2].content == "full results"


def test_capsule_edit_waits_for_its_trigger():
    history, ledger, _ = _history_and_ledger()
    edit = CitationCapsuleEdit(ledger=ledger, evidence_tools=["search"], trigger=10_000)
    messages = list(history)
    edit.apply(messages, count_tokens=count_tokens_approximately)
    assert messages == history


# -- app shapes -----------------------------------------------------------------------------------


def test_stateless_agent_carries_the_ledger_in_its_input_and_output():
    hotel = _answer_chunk(HOTEL)
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    first = ScriptedModel(
        messages=iter([_search("s1", HOTEL.question), _cite("c1", hotel.id), AIMessage("EUR 230.")])
    )
    agent = create_agent(first, tools=[SEARCH], middleware=[middleware])  # no checkpointer
    out = agent.invoke({"messages": [HumanMessage(HOTEL.question)]})
    assert EvidenceLedger.from_json(out[LEDGER_KEY]).cited_ids(0) == (hotel.id,)

    second = ScriptedModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(second, tools=[SEARCH], middleware=[middleware])
    history = [*out["messages"], HumanMessage("And the cap again?")]
    agent.invoke({"messages": history, LEDGER_KEY: out[LEDGER_KEY]})
    (earlier,) = _tool_contents(second.seen[0])
    assert hotel.page_content in earlier  # its citation survived, carried by the app
    others = [d for d in LexicalRetriever().invoke(HOTEL.question) if d.id != hotel.id]
    assert all(d.page_content not in earlier for d in others)


def test_summarization_and_capsule_middleware_run_together():
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    saver = InMemorySaver()
    summarizer = SummarizationMiddleware(
        model=FakeListChatModel(responses=["Summary: the hotel cap was discussed."] * 10),
        trigger=("messages", 8),
        keep=("messages", 4),
    )
    capsule = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    hotel, hold = _answer_chunk(HOTEL), _answer_chunk(HOLD)
    scripts = [
        [_search("a1", HOTEL.question), _cite("a2", hotel.id), AIMessage("EUR 230.")],
        [_search("b1", HOLD.question), _cite("b2", hold.id), AIMessage("Renata Duarte.")],
        [AIMessage("Noted.")],
    ]
    for question, script in zip((HOTEL.question, HOLD.question, "thanks"), scripts, strict=True):
        model = ScriptedModel(messages=iter(script))
        agent = create_agent(
            model, tools=[SEARCH], middleware=[capsule, summarizer], checkpointer=saver
        )
        agent.invoke({"messages": [HumanMessage(question)]}, CONFIG)
    stored = agent.get_state(CONFIG).values
    ledger = EvidenceLedger.from_json(stored[LEDGER_KEY])
    assert not ledger.in_progress
    assert ledger.ended_at == len(stored["messages"])  # re-anchored on what remains
    assert any("Summary" in str(m.content) for m in stored["messages"])


def test_middleware_names_an_evidence_tool_the_agent_does_not_have():
    model = ScriptedModel(messages=iter([AIMessage("unused")]))
    middleware = CitationCapsuleMiddleware(evidence_tools=["serach"])  # a typo
    agent = create_agent(model, tools=[SEARCH], middleware=[middleware])
    with pytest.raises(ValueError, match=r"\['serach'\] are not among the agent's tools"):
        agent.invoke({"messages": [HumanMessage("hi")]})
    assert model.seen == []


def test_middleware_refuses_an_app_tool_that_takes_the_cite_name():
    theirs = cite_tool("cite")  # another tool of the same name
    model = ScriptedModel(messages=iter([AIMessage("unused")]))
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    agent = create_agent(model, tools=[SEARCH, theirs], middleware=[middleware])
    with pytest.raises(ValueError, match=r"also named 'cite'.*cite_tool_name"):
        agent.invoke({"messages": [HumanMessage("hi")]})


def test_middleware_refuses_cite_and_recall_sharing_a_name():
    with pytest.raises(ValueError, match="cannot share the name"):
        CitationCapsuleMiddleware(evidence_tools=[SEARCH], recall_tool_name="cite")


def test_middleware_pickles_and_still_works():
    import pickle

    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH], max_capsule_tokens=5_000)
    restored = pickle.loads(pickle.dumps(middleware))
    assert [t.name for t in restored.tools] == ["cite", "recall"]
    assert restored.evidence_tools == middleware.evidence_tools
    hotel = _answer_chunk(HOTEL)
    model = ScriptedModel(messages=iter([_search("p1", HOTEL.question), AIMessage("EUR 230")]))
    agent = create_agent(model, tools=[SEARCH], middleware=[restored], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(HOTEL.question)]}, CONFIG)
    assert hotel.page_content in _tool_contents(model.seen[1])[0]


async def test_async_picture_fetcher_is_awaited_once_per_question():
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
    fetched: list[str] = []

    async def fetch(picture):
        fetched.append(picture.ref)
        return png

    search = capsa_retriever_tool(_PictureRetriever(), name="search")
    middleware = CitationCapsuleMiddleware(evidence_tools=[search], fetch_picture=fetch)
    saver = InMemorySaver()
    first = ScriptedModel(
        messages=iter([_search("f1", "closures"), AIMessage("See [notice-figure-0001].")])
    )
    agent = create_agent(first, tools=[search], middleware=[middleware], checkpointer=saver)
    await agent.ainvoke({"messages": [HumanMessage("closures?")]}, CONFIG)
    second = ScriptedModel(
        messages=iter([_search("f2", "closures"), _search("f3", "again"), AIMessage("ok")])
    )
    agent = create_agent(second, tools=[search], middleware=[middleware], checkpointer=saver)
    await agent.ainvoke({"messages": [HumanMessage("and?")]}, CONFIG)
    assert len(second.seen) >= 3  # three model calls of one question, each with the picture
    assert all(any(isinstance(m.content, list) for m in view) for view in second.seen)
    assert fetched == ["#/pictures/0"]


def _pictures_sent(view: list[BaseMessage]) -> list[str]:
    return [
        block["base64"]
        for m in view
        if isinstance(m.content, list)
        for block in m.content
        if isinstance(block, dict) and block.get("type") == "image"
    ]


@pytest.mark.parametrize("threads", [True, False], ids=["threads", "stateless"])
def test_one_middleware_fetches_each_conversations_own_pictures(threads: bool):
    """A picture store answers each user with their own bytes; nothing crosses conversations."""
    import base64

    user = {"name": ""}
    fetched: list[str] = []

    def fetch(picture):
        fetched.append(user["name"])
        return b"\x89PNG\r\n\x1a\n" + user["name"].encode() * 8

    search = capsa_retriever_tool(_PictureRetriever(), name="search")
    middleware = CitationCapsuleMiddleware(evidence_tools=[search], fetch_picture=fetch)
    saver = InMemorySaver()
    sent: dict[str, list[str]] = {}
    for name in ("alice", "bob"):
        user["name"] = name
        config = {"configurable": {"thread_id": name}} if threads else {}
        first = ScriptedModel(
            messages=iter([_search(f"{name}1", "closures"), AIMessage("See [notice-figure-0001].")])
        )
        agent = create_agent(
            first, tools=[search], middleware=[middleware], checkpointer=saver if threads else None
        )
        state = agent.invoke({"messages": [HumanMessage("closures?")]}, config)
        second = ScriptedModel(messages=iter([AIMessage("ok"), AIMessage("ok")]))
        agent = create_agent(
            second, tools=[search], middleware=[middleware], checkpointer=saver if threads else None
        )
        follow_up = HumanMessage("And the exits?")
        agent.invoke(
            {"messages": [follow_up]}
            if threads
            else {**state, "messages": [*state["messages"], follow_up]},
            config,
        )
        sent[name] = [base64.b64decode(b).decode("latin-1") for b in _pictures_sent(second.seen[0])]
    assert sent["alice"] and all("alice" in picture for picture in sent["alice"])
    assert sent["bob"] and all("bob" in picture for picture in sent["bob"])
    assert set(fetched) == {"alice", "bob"}


def test_one_middleware_checks_every_agents_tools():
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    model = ScriptedModel(messages=iter([AIMessage("ok")]))
    create_agent(model, tools=[SEARCH], middleware=[middleware]).invoke(
        {"messages": [HumanMessage("hi")]}
    )
    unrelated = capsa_retriever_tool(_PictureRetriever(), name="figures")
    other = create_agent(
        ScriptedModel(messages=iter([AIMessage("ok")])), tools=[unrelated], middleware=[middleware]
    )
    with pytest.raises(ValueError, match="not among the agent's tools"):
        other.invoke({"messages": [HumanMessage("hi")]})


def test_middleware_bound_uses_the_callers_tokenizer():
    hotel = _answer_chunk(HOTEL)
    counted: list[str] = []

    def encode(text: str) -> list[str]:  # an encoder: returns tokens, like tiktoken's encode
        counted.append(text)
        return text.split()

    saver = InMemorySaver()
    middleware = CitationCapsuleMiddleware(
        evidence_tools=[SEARCH], max_capsule_tokens=60, tokenizer=encode
    )
    model = ScriptedModel(
        messages=iter([_search("t1", HOTEL.question), _cite("t2", hotel.id), AIMessage("EUR 230")])
    )
    agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage(HOTEL.question)]}, CONFIG)
    model = ScriptedModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("again?")]}, CONFIG)
    (earlier,) = _tool_contents(model.seen[0])
    assert len(earlier.split()) <= 60
    assert hotel.page_content not in earlier and hotel.id in earlier  # named, recallable
    assert counted


def test_capsule_messages_and_edit_take_a_tokenizer_and_bound():
    history, ledger, hotel = _history_and_ledger()
    view = capsule_messages(
        history,
        ledger=ledger,
        evidence_tools=["search"],
        max_capsule_tokens=40,
        tokenizer=str.split,
    )
    assert len(view[2].content.split()) <= 40 and hotel.id in view[2].content
    edit = CitationCapsuleEdit(
        ledger=ledger, evidence_tools=["search"], max_capsule_tokens=40, tokenizer=str.split
    )
    messages = list(history)
    edit.apply(messages, count_tokens=count_tokens_approximately)
    assert messages[2].content == view[2].content


# -- ended questions' cite exchanges off the wire ------------------------------------------------


def _unpaired(messages) -> set[str]:
    """Tool call ids with no return, and returns with no call, anywhere in a request."""
    calls: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            calls |= {c["id"] for c in m.tool_calls}
            blocks = m.content if isinstance(m.content, list) else []
            uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            calls |= {b["id"] for b in uses}
            calls |= {c["id"] for c in m.additional_kwargs.get("tool_calls", [])}
    returns = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return calls ^ returns


def _cite_ids_on_the_wire(messages) -> list[str]:
    return [m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.name == "cite"]


def _three_questions(path, **middleware_options: Any):
    hotel, hold, stipend = _answer_chunk(HOTEL), _answer_chunk(HOLD), _answer_chunk(STIPEND)
    requests: list[list[BaseMessage]] = []
    for k, (question, chunk) in enumerate(((HOTEL, hotel), (HOLD, hold), (STIPEND, stipend)), 1):
        script = [
            _search(f"q{k}-s", question.question),
            _cite(f"q{k}-c", chunk.id),
            AIMessage(f"Answer {k} [{chunk.id}]."),
        ]
        seen, state = _ask(path, question.question, script, **middleware_options)
        requests += seen
    return requests, state


def test_ended_questions_cite_exchanges_leave_the_wire_and_stay_stored(tmp_path):
    requests, state = _three_questions(tmp_path / "threads.sqlite")
    assert [_cite_ids_on_the_wire(r) for r in requests] == [
        [], [], ["q1-c"],  # Q1: its own cite exchange, while it is the current question
        [], [], ["q2-c"],
        [], [], ["q3-c"],
    ]  # fmt: skip
    assert not any(c["name"] == "cite" for m in requests[6] for c in getattr(m, "tool_calls", []))
    assert all(_unpaired(r) == set() for r in requests)
    assert _cite_ids_on_the_wire(state["messages"]) == ["q1-c", "q2-c", "q3-c"]
    assert _tool_contents(state["messages"], "cite")[0].startswith("Recorded 1 citation")


def test_every_request_keeps_the_previous_ones_prefix_when_cites_leave(tmp_path):
    requests, _ = _three_questions(tmp_path / "threads.sqlite")
    assert len(requests) == 9  # three model calls per question
    for n, (before, after) in enumerate(itertools.pairwise(requests), 1):
        if n % 3:  # the same question: the whole request leads the next one
            assert after[: len(before)] == before
        else:  # a question ended: everything up to its own message stays as it was
            asked = max(i for i, m in enumerate(before) if isinstance(m, HumanMessage))
            assert after[: asked + 1] == before[: asked + 1]


def test_keep_cite_calls_keeps_every_cite_exchange_on_the_wire(tmp_path):
    requests, _ = _three_questions(tmp_path / "threads.sqlite", keep_cite_calls=True)
    assert _cite_ids_on_the_wire(requests[-1]) == ["q1-c", "q2-c", "q3-c"]
    assert all(_unpaired(r) == set() for r in requests)


def test_capsule_messages_removes_every_trace_of_a_cite_call():
    hotel = _answer_chunk(HOTEL)
    docs = LexicalRetriever().invoke(HOTEL.question)
    search_call = {"name": "search", "args": {"query": "hotel"}, "id": "s1", "type": "tool_call"}
    cite_call = {"name": "cite", "args": {"chunk_ids": [hotel.id]}, "id": "c1", "type": "tool_call"}
    history: list[BaseMessage] = [
        HumanMessage(HOTEL.question),
        AIMessage(  # a provider that keeps calls in content blocks and raw kwargs as well
            content=[
                {"type": "text", "text": "Searching and citing."},
                {"type": "tool_use", "id": "s1", "name": "search", "input": {"query": "hotel"}},
                {"type": "tool_use", "id": "c1", "name": "cite", "input": {}},
            ],
            tool_calls=[search_call, cite_call],
            additional_kwargs={"tool_calls": [{"id": "s1"}, {"id": "c1"}], "extra": 1},
        ),
        ToolMessage("full results", tool_call_id="s1", name="search", artifact=docs),
        ToolMessage("Recorded 1 citation.", tool_call_id="c1", name="cite", artifact=[hotel.id]),
        AIMessage(f"EUR 230 [{hotel.id}]"),
        HumanMessage("follow-up"),
    ]
    before = [m.model_copy(deep=True) for m in history]
    evidence = [
        Evidence(chunk_id=d.id, content=d.page_content, document_id=d.metadata["source"])
        for d in docs
    ]
    ledger = EvidenceLedger().begin_question(0).record_retrieval(evidence, tool="search")
    ledger = ledger.record_citations([hotel.id]).end_question(5).begin_question(5)
    view = capsule_messages(history, ledger=ledger, evidence_tools=["search"], cite_tools=["cite"])
    assert history == before
    assert _unpaired(view) == set()
    caller = view[1]
    assert [c["id"] for c in caller.tool_calls] == ["s1"]
    assert [b.get("id") for b in caller.content if isinstance(b, dict)] == [None, "s1"]
    assert caller.additional_kwargs == {"tool_calls": [{"id": "s1"}], "extra": 1}
    kinds = [HumanMessage, AIMessage, ToolMessage, AIMessage, HumanMessage]
    assert [type(m) for m in view] == kinds
    assert hotel.page_content in view[2].content


def _breakpoints(messages) -> list[int]:
    """Positions of messages whose content carries an Anthropic cache breakpoint."""
    return [n for n, m in enumerate(messages) if isinstance(m.content, list)
            and any(isinstance(b, dict) and "cache_control" in b for b in m.content)]


def test_cache_breakpoint_marks_the_previous_questions_message_on_every_request(tmp_path):
    requests, state = _three_questions(tmp_path / "threads.sqlite", cache_breakpoint=True)
    asked = [[n for n, m in enumerate(r) if isinstance(m, HumanMessage)] for r in requests]
    # Q1 has no earlier question; from Q2 on, the one before the current question
    assert [_breakpoints(r) for r in requests[:3]] == [[], [], []]
    assert all(_breakpoints(r) == [a[-2]] for r, a in zip(requests[3:], asked[3:], strict=True))
    marked = requests[3][asked[3][-2]]
    assert marked.content == [{"type": "text", "text": HOTEL.question,
                               "cache_control": {"type": "ephemeral"}}]
    assert _breakpoints(state["messages"]) == []  # the stored history is never marked


def test_without_cache_breakpoint_no_request_is_marked(tmp_path):
    requests, _ = _three_questions(tmp_path / "threads.sqlite")
    assert all(_breakpoints(r) == [] for r in requests)


def test_cache_breakpoint_goes_on_the_last_block_of_a_copy():
    from capsa.langchain.middleware import with_cache_breakpoint

    picture = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    first = HumanMessage(content=["What is on this page?", picture])
    history = [first, AIMessage("A map."), HumanMessage("And the legend?")]
    marked = with_cache_breakpoint(history)
    assert marked[0].content == ["What is on this page?",
                                 {**picture, "cache_control": {"type": "ephemeral"}}]
    assert first.content == ["What is on this page?", picture]  # the caller's message as it was
    assert marked[1:] == history[1:]
    assert with_cache_breakpoint(history[:1]) == history[:1]  # one question: nothing to mark


# -- nothing heavy on the event loop --------------------------------------------------------------


class _Ticker:
    """A coroutine that yields to the loop as often as it can and keeps its longest gap.

    The gap is reported for reading, never asserted: tests do not assert wall-clock
    times. What is asserted is which thread ran the work.
    """

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = False

    async def run(self) -> None:
        import asyncio
        import time

        last = time.perf_counter()
        while not self._stop:
            await asyncio.sleep(0)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now

    def stop(self) -> None:
        self._stop = True


def _recording_threads(monkeypatch, module, name: str) -> list[int]:
    import threading

    threads: list[int] = []
    real = getattr(module, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recorded)
    return threads


async def test_a_twenty_question_async_chat_compacts_off_the_event_loop(monkeypatch):
    import asyncio
    import threading

    import capsa.langchain.middleware as middleware_module

    threads = _recording_threads(monkeypatch, middleware_module, "compact")
    loop_thread = threading.get_ident()
    ticker = _Ticker()
    ticking = asyncio.create_task(ticker.run())
    saver = InMemorySaver()
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    questions = [*QUESTIONS, *QUESTIONS[:5]][:20]
    for n, question in enumerate(questions):
        chunk = _answer_chunk(question)
        model = ScriptedModel(
            messages=iter(
                [_search(f"s{n}", question.question), _cite(f"c{n}", chunk.id), AIMessage("ok")]
            )
        )
        agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
        await agent.ainvoke({"messages": [HumanMessage(question.question)]}, CONFIG)
    ticker.stop()
    await ticking
    print(f"longest loop gap over 20 questions: {ticker.longest * 1000:.1f} ms")
    assert len(threads) == 20 * 3  # every model call compacted
    assert loop_thread not in threads  # and none of it on the loop's thread
    stored = (await agent.aget_state(CONFIG)).values
    assert not EvidenceLedger.from_json(stored[LEDGER_KEY]).in_progress


# -- a bounded request that keeps the cache -------------------------------------------------------


def _bounded_chat(low_water: float) -> tuple[list[int], list[list[BaseMessage]]]:
    """A 20-question chat under max_capsule_tokens; the questions where an ended one changed.

    A step frees about ``(1 - low_water) * bound`` tokens and each question adds its
    cited chunks, so steps come every few questions when the bound is several
    questions' worth (here 1200 tokens, about 150 a question)."""
    saver = InMemorySaver()
    middleware = CitationCapsuleMiddleware(
        evidence_tools=[SEARCH], max_capsule_tokens=1200, low_water=low_water
    )
    before: list[str] = []
    changed: list[int] = []
    requests: list[list[BaseMessage]] = []
    questions = [*QUESTIONS, *QUESTIONS[:5]][:20]
    for n, question in enumerate(questions):
        chunk = _answer_chunk(question)
        model = ScriptedModel(
            messages=iter(
                [_search(f"s{n}", question.question), _cite(f"c{n}", chunk.id), AIMessage("ok")]
            )
        )
        agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage(question.question)]}, CONFIG)
        first = model.seen[0]
        requests.append(first)
        ended = _tool_contents(first)
        if ended[: len(before)] != before:
            changed.append(n)
        before = ended
    return changed, requests


def test_a_bounded_capsule_changes_ended_questions_only_in_steps():
    stepped, requests = _bounded_chat(0.6)
    tight, _ = _bounded_chat(1.0)
    assert stepped and tight  # the bound was reached
    assert len(stepped) <= 20 // 3 < len(tight)  # measured: 4 of 20 against 11 of 20
    assert all(b - a >= 2 for a, b in itertools.pairwise(stepped))
    assert len(requests) == 20


# -- summarisation that splits a question keeps its citations -------------------------------------


def test_a_question_the_summariser_splits_keeps_its_citations():
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from capsa.capsule import recall

    saver = InMemorySaver()
    summarizer = SummarizationMiddleware(
        model=FakeListChatModel(responses=["Summary: policies were discussed."] * 10),
        trigger=("messages", 8),
        keep=("messages", 4),
    )
    capsule = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    hotel, hold = _answer_chunk(HOTEL), _answer_chunk(HOLD)
    scripts = [
        [_search("a1", HOTEL.question), _cite("a2", hotel.id), AIMessage("EUR 230.")],
        [_search("b1", HOLD.question), _cite("b2", hold.id), AIMessage("Renata Duarte.")],
        [AIMessage("Noted.")],
    ]
    models = []
    for question, script in zip((HOTEL.question, HOLD.question, "thanks"), scripts, strict=True):
        model = ScriptedModel(messages=iter(script))
        models.append(model)
        agent = create_agent(
            model, tools=[SEARCH], middleware=[capsule, summarizer], checkpointer=saver
        )
        agent.invoke({"messages": [HumanMessage(question)]}, CONFIG)
    stored = agent.get_state(CONFIG).values
    ledger = EvidenceLedger.from_json(stored[LEDGER_KEY])
    assert any("Summary" in str(m.content) for m in stored["messages"])  # it did summarise
    assert {hotel.id, hold.id} <= set(ledger.carried)  # the citations survived
    # the summariser split the second question: its cite exchange and answer stayed,
    # its search return went into the summary
    last = models[-1].seen[-1]
    assert not any(hold.page_content in t for t in _tool_contents(last))
    assert "Recorded 1 citation" in " ".join(str(m.content) for m in last)
    # and every cited chunk, kept or summarised away, is recallable whole
    found = recall([hotel.id, hold.id], [], ledger, owned_tools={"search"})
    assert [e.content for e in found.evidence] == [hotel.page_content, hold.page_content]


# -- budgeted evidence ----------------------------------------------------------------------------


def test_a_budgeted_search_returns_a_packet_and_recall_brings_every_chunk_back_whole():
    budgeted = capsa_retriever_tool(LexicalRetriever(), name="search", budget=200)
    middleware = CitationCapsuleMiddleware(evidence_tools=[budgeted])
    hold = _answer_chunk(HOLD)
    docs = LexicalRetriever().invoke(HOLD.question)
    others = [d.id for d in docs if d.id != hold.id]
    model = ScriptedModel(
        messages=iter(
            [
                _search("s1", HOLD.question),
                AIMessage(
                    "", tool_calls=[{"name": "recall", "args": {"chunk_ids": others}, "id": "r1"}]
                ),
                _cite("c1", hold.id),
                AIMessage("Renata Duarte."),
            ]
        )
    )
    agent = create_agent(
        model, tools=[budgeted], middleware=[middleware], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage(HOLD.question)]}, CONFIG)
    (packet,) = _tool_contents(model.seen[1])
    whole = sum(count_tokens_approximately([HumanMessage(d.page_content)]) for d in docs)
    assert count_tokens_approximately([HumanMessage(packet)]) < whole  # less is written
    assert "recall" in packet
    assert hold.page_content in packet  # the answer-bearing chunk, ranked first, whole
    assert any(d.page_content not in packet for d in docs if d.id in others)  # others cut
    (recalled,) = _tool_contents(model.seen[2], name="recall")
    for doc in docs:
        if doc.id in others:
            assert doc.page_content in recalled  # every other chunk back whole
    stored = agent.get_state(CONFIG).values
    assert hold.id in EvidenceLedger.from_json(stored[LEDGER_KEY]).cited_ids()


@pytest.mark.parametrize("budget", [34, 60, 100, 150, 200, 300])
def test_the_budgeted_tool_returns_at_most_its_budget(budget):
    tool = capsa_retriever_tool(LexicalRetriever(), name="search", budget=budget)
    for question in QUESTIONS:
        text, docs = tool.func(question.question)  # type: ignore[misc]
        assert estimate_tokens(text) <= budget
        assert all(d.id in text for d in docs) or 'reason="budget"' in text


def test_the_budgeted_tool_refuses_a_budget_below_the_floor():
    with pytest.raises(BudgetError, match=r"budget=33 tokens .* at least 34"):
        capsa_retriever_tool(LexicalRetriever(), name="search", budget=33)


# -- a request bounded by default ------------------------------------------------------------------


def _request_tokens(messages: list[BaseMessage]) -> int:
    return sum(
        estimate_tokens(m.text + json.dumps([[c["name"], c["args"]] for c in m.tool_calls]))
        if isinstance(m, AIMessage) and m.tool_calls
        else estimate_tokens(m.text)
        for m in messages
    )


def _profiled_requests(max_input_tokens: int, count: int = 20) -> list[list[list[BaseMessage]]]:
    """Every request of a `count`-question chat under the default view bound and a profile."""
    saver = InMemorySaver()
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    requests: list[list[list[BaseMessage]]] = []
    questions = [QUESTIONS[n % len(QUESTIONS)] for n in range(count)]
    for n, question in enumerate(questions):
        chunk = _answer_chunk(question)
        replies = [_search(f"s{n}", question.question), _cite(f"c{n}", chunk.id), AIMessage("ok")]
        model = ScriptedModel(
            messages=iter(replies), profile={"max_input_tokens": max_input_tokens}
        )
        agent = create_agent(model, tools=[SEARCH], middleware=[middleware], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage(question.question)]}, CONFIG)
        requests.append(model.seen)
    return requests


def _profiled_chat(max_input_tokens: int) -> list[list[BaseMessage]]:
    """A 20-question chat with the default view bound and a model profile; first requests."""
    return [seen[0] for seen in _profiled_requests(max_input_tokens)]


def test_the_default_view_bound_follows_the_model_profile():
    firsts = _profiled_chat(2400)
    limit = int(2400 * VIEW_SHARE)
    assert all(_request_tokens(r) <= limit for r in firsts)
    assert any(m.text.startswith('<not-shown questions="') for m in firsts[-1])


def test_the_default_view_bound_drops_old_questions_in_steps():
    firsts = _profiled_chat(2400)
    starts = [r[0].text for r in firsts]
    moved = [n for n in range(1, len(starts)) if starts[n] != starts[n - 1]]
    assert moved and len(moved) <= 20 // 3


@pytest.mark.parametrize(("max_input_tokens", "apart"), [(2400, 2), (4000, 3)])
def test_thirty_questions_keep_the_bound_and_move_the_prefix_in_steps(max_input_tokens, apart):
    # a step leaves (1 - LOW_WATER) of the bound as headroom: 480 tokens at 1200, 800
    # at 2000; this chat's questions compact to about 200 tokens each (up to 425), so
    # `apart` questions fit before the next step
    requests = _profiled_requests(max_input_tokens, count=30)
    limit = int(max_input_tokens * VIEW_SHARE)
    assert all(_request_tokens(r) <= limit for seen in requests for r in seen)
    starts = [[r[0].text for r in seen] for seen in requests]
    assert all(len(set(s)) == 1 for s in starts)  # never within a question
    moves = [n for n in range(1, 30) if starts[n][0] != starts[n - 1][0]]
    assert len(moves) >= 2  # the bound was reached, more than once
    assert all(b - a >= apart for a, b in itertools.pairwise(moves))


def test_the_view_bound_without_a_profile_is_the_documented_default():
    plain = GenericFakeChatModel(messages=iter([]))
    profiled = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 200_000})
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    assert middleware.view_limit(plain) == DEFAULT_VIEW_TOKENS
    assert middleware.view_limit(profiled) == 100_000
    unbounded = CitationCapsuleMiddleware(evidence_tools=[SEARCH], max_view_tokens=None)
    assert unbounded.view_limit(profiled) is None


def test_the_view_bound_refuses_a_bad_value():
    with pytest.raises(ValueError, match="max_view_tokens"):
        CitationCapsuleMiddleware(evidence_tools=[SEARCH], max_view_tokens=0)


# -- carried is bounded ----------------------------------------------------------------------------


def test_the_middleware_prunes_what_a_shortening_carried_when_a_question_ends():
    chunks = [Evidence(chunk_id=f"old-{i}", content=f"Old clause {i}.", document_id="old")
              for i in range(40)]
    ledger = EvidenceLedger().begin_question(0).record_retrieval(chunks, tool="search")
    ledger = ledger.record_citations([c.chunk_id for c in chunks]).end_question(4).reanchor(0)
    model = ScriptedModel(messages=iter([_search("s1", HOTEL.question), AIMessage("EUR 230.")]))
    middleware = CitationCapsuleMiddleware(evidence_tools=[SEARCH])
    agent = create_agent(model, tools=[SEARCH], middleware=[middleware])
    out = agent.invoke({"messages": [HumanMessage(HOTEL.question)], LEDGER_KEY: ledger.to_json()})
    carried = EvidenceLedger.from_json(out[LEDGER_KEY]).carried
    assert len(ledger.carried) == 40 and carried == ledger.carried[8:]  # the newest 32
