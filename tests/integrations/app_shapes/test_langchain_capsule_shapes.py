"""Citation capsules in `create_agent` apps as users build them, beside stock middleware.

Checkpointed threads resumed by fresh agents, human-in-the-loop interrupts, call limits,
tool retries, summarisation in either order, parallel tool calls, the stock
`create_retriever_tool`, tools returning content blocks or JSON, ids no one should
use, stream modes, and a bounded view. Each test checks that the stored history is
never changed, that cited evidence stays on the wire, and that nothing crashes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    SummarizationMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool, create_retriever_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import PrivateAttr

from capsa.capsule import EvidenceLedger, estimate_tokens
from capsa.langchain.capsule_conversion import LEDGER_KEY, evidence_of
from capsa.langchain.middleware import CitationCapsuleMiddleware, capsa_retriever_tool

DOCS = {
    "hotel": Document(id="hotel", page_content="The hotel cap is EUR 230 in London.",
                      metadata={"title": "Travel"}),
    "train": Document(id="train", page_content="Trains are booked in standard class.",
                      metadata={"title": "Travel"}),
    "wifi": Document(id="wifi", page_content="The internet stipend is EUR 30 a month.",
                     metadata={"title": "Remote work"}),
    "meal": Document(id="meal", page_content="Meals: EUR 40 a day. Ünïcödé ✓ 日本語 — “quoted”.",
                     metadata={"title": "Travel"}),
}


def lookup(query: str) -> list[Document]:
    """Every document whose key the query names; the first two otherwise."""
    found = [d for key, d in DOCS.items() if key in query.lower()]
    return found or list(DOCS.values())[:2]


SEARCH = capsa_retriever_tool(RunnableLambda(lookup), name="search")


class ScriptedModel(GenericFakeChatModel):
    """Plays scripted replies and remembers every request it was sent; never streams
    (a fake chat model cannot stream tool calls)."""

    disable_streaming: bool = True
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> Any:
        self._seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None,
                         run_manager: Any = None, **kwargs: Any) -> Any:
        self._seen.append(list(messages))
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)


def calls(*specs: tuple[str, dict[str, Any], str]) -> AIMessage:
    """One assistant message making every call in `specs` (name, args, id), in parallel."""
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in specs])


def search(call_id: str, query: str) -> AIMessage:
    return calls(("search", {"query": query}, call_id))


def cite(call_id: str, *ids: str) -> AIMessage:
    return calls(("cite", {"chunk_ids": list(ids)}, call_id))


def recall(call_id: str, *ids: str) -> AIMessage:
    return calls(("recall", {"chunk_ids": list(ids)}, call_id))


def returns(messages: list[BaseMessage], name: str = "search") -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolMessage) and m.name == name]


def ledger_of(values: dict[str, Any]) -> EvidenceLedger:
    return EvidenceLedger.from_json(values[LEDGER_KEY])


class Thread:
    """One checkpointed thread; every question runs in a fresh agent, as a new process would."""

    def __init__(self, middleware: list[Any], tools: list[BaseTool] | None = None,
                 name: str = "t") -> None:
        self.middleware = middleware
        self.tools = tools or [SEARCH]
        self.saver = InMemorySaver()
        self.config: Any = {"configurable": {"thread_id": name}}
        self.models: list[ScriptedModel] = []
        self.agent: Any = None

    def stored(self) -> list[BaseMessage]:
        if self.agent is None:
            return []
        return list(self.agent.get_state(self.config).values.get("messages", []))

    def values(self) -> dict[str, Any]:
        return dict(self.agent.get_state(self.config).values)

    def ask(self, question: str, script: list[AIMessage], resume: Any = None,
            grows: bool = True) -> ScriptedModel:
        """Ask in a fresh agent; unless a summariser may rewrite it, the store only grows."""
        before = copy.deepcopy(self.stored())
        model = ScriptedModel(messages=iter(script))
        self.models.append(model)
        self.agent = create_agent(model, tools=self.tools, middleware=self.middleware,
                                  checkpointer=self.saver)
        out = self.agent.invoke({"messages": [HumanMessage(question)]}, self.config)
        while resume is not None and "__interrupt__" in out:
            out = self.agent.invoke(Command(resume=resume), self.config)
        after = self.stored()
        if grows:
            assert after[: len(before)] == before  # capsa never changes the stored history
        return model


def hotel_then_wifi() -> list[tuple[str, list[AIMessage]]]:
    return [
        ("What is the hotel cap?", [search("s1", "hotel"), cite("c1", "hotel"),
                                    AIMessage("EUR 230 [hotel].")]),
        ("And the internet stipend?", [search("s2", "wifi"), AIMessage("EUR 30 [wifi].")]),
        ("Thanks!", [AIMessage("You're welcome.")]),
    ]


def capsule() -> CitationCapsuleMiddleware:
    return CitationCapsuleMiddleware(evidence_tools=[SEARCH])


# -- checkpointers give artifacts back as dicts ----------------------------------------------


def stored_artifact_documents(tool: BaseTool) -> list[Any]:
    thread = Thread([CitationCapsuleMiddleware(evidence_tools=[tool])], [tool])
    thread.ask("hotel?", [search("s1", "hotel"), AIMessage("ok")])
    return [a for m in thread.stored() if isinstance(m, ToolMessage) for a in m.artifact]


def test_a_checkpointer_gives_document_artifacts_back_as_dicts_which_are_still_evidence() -> None:
    (restored,) = stored_artifact_documents(SEARCH)
    assert isinstance(restored, dict)  # LangGraph's serializer: the Document's model_dump
    found = evidence_of(restored)
    assert found is not None and found.chunk_id == "hotel" and found.title == "Travel"
    assert found.content == DOCS["hotel"].page_content


def test_the_langchain_serialised_form_of_a_document_is_evidence_too() -> None:
    found = evidence_of(dumpd(Document(id="d1", page_content="x", metadata={"title": "T"})))
    assert found is not None and (found.chunk_id, found.title) == ("d1", "T")
    assert evidence_of({"page_content": 3}) is None and evidence_of({"lc": 1}) is None


def long_documents() -> list[Document]:
    return [Document(id=f"d{i}", page_content=f"Rule {i} about hotels: " + "lorem ipsum " * 40,
                     metadata={"title": f"Rule {i}"}) for i in range(5)]


def test_a_budgeted_return_keeps_every_chunk_recallable_after_a_checkpoint() -> None:
    docs = long_documents()
    budgeted = capsa_retriever_tool(RunnableLambda(lambda q: docs), name="search", budget=150)
    thread = Thread([CitationCapsuleMiddleware(evidence_tools=[budgeted])], [budgeted])
    first = thread.ask("Rule 0?", [search("s1", "Rule 0 hotels"), AIMessage("Yes [d0].")])
    (packet,) = returns(first._seen[-1])
    assert docs[3].page_content not in packet  # the packet named d3 only
    second = thread.ask("Rule 3?", [recall("r1", "d3"), AIMessage("Yes [d3].")])
    (recalled,) = returns(second._seen[-1], "recall")
    assert docs[3].page_content in recalled  # back whole from the stored artifact
    (earlier,) = returns(second._seen[-1])
    assert docs[0].page_content in earlier  # cited, shown in part: whole once its question ended


def test_the_stock_retriever_tool_with_artifacts_is_compacted_in_later_questions() -> None:
    class Lookup(BaseRetriever):
        def _get_relevant_documents(self, query: str, *,
                                    run_manager: CallbackManagerForRetrieverRun
                                    ) -> list[Document]:
            return [*lookup(query), DOCS["train"]]

    stock = create_retriever_tool(Lookup(), "search", "Search the handbook.",
                                  response_format="content_and_artifact")
    thread = Thread([CitationCapsuleMiddleware(evidence_tools=[stock])], [stock])
    for question, script in hotel_then_wifi():
        model = thread.ask(question, script)
    first, second = returns(model._seen[-1])
    assert DOCS["hotel"].page_content in first and DOCS["wifi"].page_content in second
    assert DOCS["train"].page_content not in first + second  # uncited: receipted
    assert 'ids="train"' in first or 'id="train"' in first


# -- stock middleware in the same stack ------------------------------------------------------


@pytest.mark.parametrize("capsa_first", [True, False])
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_human_in_the_loop_interrupts_resume_in_the_same_question(capsa_first: bool,
                                                                  decision: str) -> None:
    hitl = HumanInTheLoopMiddleware(interrupt_on={"search": True})
    stack = [capsule(), hitl] if capsa_first else [hitl, capsule()]
    thread = Thread(stack)
    resume = {"decisions": [{"type": decision, "message": "not now"}]}
    for question, script in hotel_then_wifi():
        model = thread.ask(question, script, resume=resume)
    ledger = ledger_of(thread.values())
    stored = thread.stored()
    assert ledger.questions == tuple(i for i, m in enumerate(stored)
                                     if isinstance(m, HumanMessage))
    assert not ledger.in_progress and ledger.ended_at == len(stored)
    sent = " ".join(returns(model._seen[-1]))
    if decision == "approve":
        assert ledger.cited_ids(ledger.questions[0]) == ("hotel",)
        assert DOCS["hotel"].page_content in sent and DOCS["wifi"].page_content in sent
    else:
        assert sent.count("User rejected") == 2  # kept verbatim: no evidence in them


@pytest.mark.parametrize("capsa_first", [True, False])
def test_a_model_call_limit_ends_the_question_and_the_next_one_begins_cleanly(
        capsa_first: bool) -> None:
    limit = ModelCallLimitMiddleware(run_limit=2, exit_behavior="end")
    thread = Thread([capsule(), limit] if capsa_first else [limit, capsule()])
    for question, script in hotel_then_wifi():
        model = thread.ask(question, script)
    stored = thread.stored()
    assert any("limit" in m.text for m in stored if isinstance(m, AIMessage))
    ledger = ledger_of(thread.values())
    assert len(ledger.questions) == 3 and ledger.ended_at == len(stored)
    assert ledger.cited_ids(ledger.questions[0]) == ("hotel",)  # cited before the limit hit
    assert DOCS["hotel"].page_content in returns(model._seen[-1])[0]


def test_a_retried_tool_failure_leaves_one_recorded_return() -> None:
    failures = iter([RuntimeError("index offline")])

    def flaky(query: str) -> list[Document]:
        for error in failures:
            raise error
        return lookup(query)

    tool = capsa_retriever_tool(RunnableLambda(flaky), name="search")
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    thread = Thread([CitationCapsuleMiddleware(evidence_tools=[tool]), retry], [tool])
    for question, script in hotel_then_wifi():
        model = thread.ask(question, script)
    assert len(returns(thread.stored())) == 2
    assert [e.evidence.chunk_id for e in ledger_of(thread.values()).entries] == ["hotel", "wifi"]
    assert DOCS["hotel"].page_content in returns(model._seen[-1])[0]


@pytest.mark.parametrize("capsa_first", [True, False])
def test_summarisation_in_either_order_keeps_what_was_cited(capsa_first: bool) -> None:
    summariser = SummarizationMiddleware(
        model=FakeListChatModel(responses=["Summary of the chat."] * 10),
        trigger=("messages", 8), keep=("messages", 4))
    thread = Thread([capsule(), summariser] if capsa_first else [summariser, capsule()])
    turns = [*hotel_then_wifi()[:2],
             ("Meals?", [search("s3", "meal"), AIMessage("EUR 40 [meal].")]),
             ("Thanks!", [recall("r1", "hotel"), AIMessage("EUR 230 [hotel], as said.")])]
    for question, script in turns:
        model = thread.ask(question, script, grows=False)  # the summariser rewrites it
    assert any("Summary" in m.text for m in thread.stored())
    ledger = ledger_of(thread.values())
    assert {"hotel", "wifi"} <= set(ledger.carried) | set(ledger.cited_ids())
    (recalled,) = returns(model._seen[-1], "recall")
    assert DOCS["hotel"].page_content in recalled  # its return was summarised away


# -- message shapes -------------------------------------------------------------------------------


def test_parallel_searches_in_one_message_are_both_compacted() -> None:
    thread = Thread([capsule()])
    thread.ask("Hotel and trains?", [calls(("search", {"query": "hotel"}, "a"),
                                           ("search", {"query": "train"}, "b")),
                                     cite("c", "hotel"), AIMessage("EUR 230 [hotel].")])
    model = thread.ask("Thanks", [AIMessage("ok")])
    first, second = returns(model._seen[-1])
    assert DOCS["hotel"].page_content in first
    assert DOCS["train"].page_content not in second and "train" in second  # receipted
    sent = model._seen[-1]
    answered = {m.tool_call_id for m in sent if isinstance(m, ToolMessage)}
    made = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
    assert answered == made  # no call without its return, no return without its call


def test_ids_with_quotes_markup_and_non_ascii_survive_cite_and_recall() -> None:
    ids = ['a"b', "x<y>&z", "α/β-日本", "id with space", "tab\tid", "br]ack[et"]
    docs = [Document(id=i, page_content=f"Clause {n} ✓ <b>bold</b> & “more”",
                     metadata={"title": f'Title "{n}" <x>'}) for n, i in enumerate(ids)]
    tool = capsa_retriever_tool(RunnableLambda(lambda q: docs), name="search")
    thread = Thread([CitationCapsuleMiddleware(evidence_tools=[tool])], [tool])
    first = thread.ask("q?", [search("s", "x"), cite("c", *ids[:3]), AIMessage("ok")])
    assert returns(first._seen[-1], "cite")[-1].startswith("Recorded 3 citations")
    second = thread.ask("more?", [recall("r", *ids[3:]), AIMessage("ok")])
    (earlier,) = returns(second._seen[-1])
    assert earlier.count("<chunk ") == 3
    (recalled,) = returns(second._seen[-1], "recall")
    assert recalled.count("<chunk ") == 3 and "not-found" not in recalled


def test_evidence_tools_returning_blocks_or_json_are_kept_and_never_crash() -> None:
    def with_picture(query: str) -> tuple[list[dict[str, Any]], list[Document]]:
        docs = lookup(query)
        return ([{"type": "text", "text": "\n".join(d.page_content for d in docs)},
                 {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}], docs)

    def as_json(query: str) -> dict[str, Any]:
        return {"results": [d.page_content for d in lookup(query)]}

    blocks = StructuredTool.from_function(with_picture, name="search", description="Search.",
                                          response_format="content_and_artifact")
    plain = StructuredTool.from_function(as_json, name="search", description="Search.")
    for tool in (blocks, plain):
        thread = Thread([CitationCapsuleMiddleware(evidence_tools=[tool])], [tool])
        for question, script in [*hotel_then_wifi()[:1], ("", [AIMessage("")]),
                                 hotel_then_wifi()[1]]:
            model = thread.ask(question, script)
        sent = " ".join(returns(model._seen[-1]))
        assert DOCS["hotel"].page_content in sent and DOCS["wifi"].page_content in sent


def test_removing_a_message_by_id_keeps_the_cited_evidence_on_the_wire() -> None:
    thread = Thread([capsule()])
    for question, script in hotel_then_wifi()[:2]:
        thread.ask(question, script)
    first = thread.stored()[0]
    assert first.id is not None
    thread.agent.update_state(thread.config, {"messages": [RemoveMessage(id=first.id)]})
    model = thread.ask("Again?", [AIMessage("EUR 230 [hotel].")])
    sent = " ".join(returns(model._seen[-1]))
    assert DOCS["hotel"].page_content in sent and DOCS["wifi"].page_content in sent
    assert ledger_of(thread.values()).ended_at == len(thread.stored())


# -- bounds, streams ------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"max_capsule_tokens": 300}])
@pytest.mark.parametrize("bound", [600, 1500])
def test_every_request_of_a_long_chat_fits_the_view_bound(bound: int,
                                                          options: dict[str, Any]) -> None:
    from capsa.langchain.middleware import _wire_text

    docs = [Document(id=f"d{i}", page_content=f"Rule {i}: " + "lorem ipsum dolor " * 25,
                     metadata={"title": f"T{i}"}) for i in range(40)]
    tool = capsa_retriever_tool(RunnableLambda(lambda q: docs[int(q) * 3: int(q) * 3 + 3]),
                                name="search")
    middleware = CitationCapsuleMiddleware(evidence_tools=[tool], max_view_tokens=bound,
                                           **options)
    thread = Thread([middleware], [tool])
    for n in range(12):
        model = thread.ask(f"Question {n}", [search(f"s{n}", str(n)),
                                             cite(f"c{n}", f"d{n * 3}"),
                                             AIMessage(f"Answer [d{n * 3}].")])
        for request in model._seen:
            assert sum(estimate_tokens(_wire_text(m)) for m in request) <= bound
    assert len(thread.stored()) == 12 * 6


def sync_stream(agent: Any, payload: Any, config: Any, mode: str) -> Iterator[Any]:
    yield from agent.stream(payload, config, stream_mode=mode)


@pytest.mark.parametrize("mode", ["values", "updates", "messages"])
def test_streamed_turns_send_what_invoked_turns_send(mode: str) -> None:
    invoked = Thread([capsule()])
    for question, script in hotel_then_wifi():
        invoked.ask(question, script)
    streamed = Thread([capsule()])
    for question, script in hotel_then_wifi():
        model = ScriptedModel(messages=iter(script))
        streamed.models.append(model)
        streamed.agent = create_agent(model, tools=[SEARCH], middleware=[capsule()],
                                      checkpointer=streamed.saver)
        chunks = list(sync_stream(streamed.agent, {"messages": [HumanMessage(question)]},
                                  streamed.config, mode))
        assert chunks
    assert [[m.text for m in r] for model in streamed.models for r in model._seen] == [
        [m.text for m in r] for model in invoked.models for r in model._seen]
    anchorless = {"anchor": None}  # message ids are fresh uuids in each thread
    assert (ledger_of(streamed.values()).model_copy(update=anchorless)
            == ledger_of(invoked.values()).model_copy(update=anchorless))


async def test_astream_values_reports_each_compaction_and_keeps_the_store() -> None:
    thread = Thread([capsule()])
    for question, script in hotel_then_wifi()[:1]:
        thread.ask(question, script)
    before = copy.deepcopy(thread.stored())
    model = ScriptedModel(messages=iter([search("s2", "wifi"), AIMessage("EUR 30 [wifi].")]))
    agent = create_agent(model, tools=[SEARCH], middleware=[capsule()],
                         checkpointer=thread.saver)
    events = [e async for e in agent.astream_events({"messages": [HumanMessage("wifi?")]},
                                                     thread.config, version="v2")
              if e["event"] == "on_custom_event" and e["name"] == "capsa.capsule"]
    assert len(events) == 2 and all(e["data"]["shown"] == ["hotel"] for e in events)
    stored = list(agent.get_state(thread.config).values["messages"])
    assert stored[: len(before)] == before


def test_an_id_with_outer_spaces_can_be_recalled() -> None:
    docs = [Document(id="  padded  ", page_content="Padded clause.", metadata={"title": "T"}),
            DOCS["hotel"]]
    tool = capsa_retriever_tool(RunnableLambda(lambda q: docs), name="search")
    thread = Thread([CitationCapsuleMiddleware(evidence_tools=[tool])], [tool])
    thread.ask("q?", [search("s", "x"), AIMessage("ok [hotel]")])
    model = thread.ask("more?", [recall("r", "  padded  "), AIMessage("ok")])
    (recalled,) = returns(model._seen[-1], "recall")
    assert "Padded clause." in recalled
