"""`CapsuleMemory` in LlamaIndex apps as users build them.

Chat engines (simple, context, condense-plus-context) over every chat method, a
`FunctionAgent` whose memory is rebuilt from a file-backed chat store and a saved
ledger between questions, parallel tool calls in one message, and small inner
memories (`Memory`, `ChatMemoryBuffer`) whose token limits bound the view. Each
checks that the stored history is never changed and that cited evidence stays
on the wire or comes back through recall.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import BaseMemory, ChatMemoryBuffer, Memory
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from capsa.capsule import EvidenceLedger, estimate_tokens
from capsa.llama_index.memory import CapsuleMemory

pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")

NODES = {
    key: TextNode(id_=key, text=text, metadata={"title": key.title()})
    for key, text in {"hotel": "The hotel cap is EUR 230 in London.",
                      "wifi": "The internet stipend is EUR 30 ✓ 日本語 a month.",
                      "meal": "Meals: EUR 40 a day — “receipts” <required> & kept."}.items()
}
LONG = [TextNode(id_=f"n{i}", text=f"Rule {i} about hotels: " + "lorem ipsum dolor " * 20,
                 metadata={"title": f"Rule {i}"}) for i in range(5)]


class Lookup(BaseRetriever):
    """The nodes the query names; the meal node otherwise."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = query_bundle.query_str.lower()
        found = [n for key, n in NODES.items() if key in query] or [NODES["meal"]]
        return [NodeWithScore(node=n, score=1.0) for n in found]


class Everything(BaseRetriever):
    """Every long node, whatever the query."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=n, score=1.0) for n in LONG]


class Script:
    """Feeds scripted assistant messages and records what the model was sent."""

    def __init__(self) -> None:
        self.replies: list[ChatMessage] = []
        self.seen: list[list[ChatMessage]] = []

    def __call__(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.seen.append([m.model_copy(deep=True) for m in messages])
        return self.replies.pop(0)


def call(*specs: tuple[str, str, dict[str, Any]]) -> ChatMessage:
    """One assistant message making every (id, tool, kwargs) call in `specs`."""
    blocks = [ToolCallBlock(tool_call_id=i, tool_name=t, tool_kwargs=k) for i, t, k in specs]
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)  # type: ignore[arg-type]


def say(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


@pytest.fixture
async def memories() -> AsyncIterator[Callable[..., Memory]]:
    """`Memory.from_defaults(...)` with any options, its SQL engines disposed afterwards."""
    made: list[Memory] = []

    def make(**options: Any) -> Memory:
        made.append(Memory.from_defaults(**options))
        return made[-1]

    yield make
    for memory in made:
        engine = memory.sql_store._async_engine  # Memory offers no close(); dispose its pool
        if engine is not None:
            await engine.dispose()


def tool_texts(messages: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in messages if m.role == MessageRole.TOOL]


def tool_text(messages: list[ChatMessage], call_id: str) -> str:
    """The result of one tool call: parallel calls are stored in the order they finish."""
    (found,) = [m.content or "" for m in messages if m.role == MessageRole.TOOL
                and m.additional_kwargs.get("tool_call_id") == call_id]
    return found


def agent_for(memory: CapsuleMemory, retriever: BaseRetriever, script: Script,
              budget: int | None = None) -> FunctionAgent:
    tools = [memory.retriever_tool(retriever, name="search", budget=budget),
             memory.cite_tool(), memory.recall_tool()]
    return FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=script),
                         streaming=False)


async def ask(memory: CapsuleMemory, agent: FunctionAgent, script: Script, question: str,
              *replies: ChatMessage) -> list[ChatMessage]:
    """Run one question; the stored history only grows. Returns the last request."""
    before = copy.deepcopy(await memory.aget_all())
    script.replies = list(replies)
    await agent.run(question, memory=memory)
    after = await memory.aget_all()
    assert [m.model_dump() for m in after[: len(before)]] == [m.model_dump() for m in before]
    return script.seen[-1]


# -- chat engines -------------------------------------------------------------------------------


def engine_for(kind: type[Any], memory: CapsuleMemory) -> Any:
    llm = MockLLM(max_tokens=5)
    if kind is SimpleChatEngine:
        return SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    return kind.from_defaults(retriever=Lookup(), llm=llm, memory=memory)


async def turn(engine: Any, mode: str, question: str) -> None:
    if mode == "chat":
        engine.chat(question)
    elif mode == "achat":
        await engine.achat(question)
    elif mode == "stream_chat":
        for _ in engine.stream_chat(question).response_gen:
            pass
    else:
        response = await engine.astream_chat(question)
        async for _ in response.async_response_gen():
            pass


@pytest.mark.parametrize("mode", ["chat", "achat", "stream_chat", "astream_chat"])
@pytest.mark.parametrize("kind", [SimpleChatEngine, ContextChatEngine,
                                  CondensePlusContextChatEngine])
async def test_chat_engines_store_every_turn_and_begin_a_question_per_user_message(
        kind: type[Any], mode: str, memories: Callable[..., Memory]) -> None:
    memory = CapsuleMemory.from_defaults(memories(session_id="engine", token_limit=4000))
    engine = engine_for(kind, memory)
    for question in ("Hotel cap?", "Internet stipend?", "Meals?"):
        await turn(engine, mode, question)
    stored = memory.get_all()
    assert [m.role for m in stored] == [MessageRole.USER, MessageRole.ASSISTANT] * 3
    assert [m.content for m in stored[::2]] == ["Hotel cap?", "Internet stipend?", "Meals?"]
    assert memory.ledger.questions == (0, 2, 4)
    assert [m.content for m in memory.get()] == [m.content for m in stored]


# -- FunctionAgent, persisted and rebuilt --------------------------------------------------------


async def test_a_memory_rebuilt_from_its_chat_store_and_ledger_recalls_budgeted_chunks_whole(
        tmp_path: Path, memories: Callable[..., Memory]) -> None:
    uri = f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"

    def rebuilt(saved: str | None) -> tuple[CapsuleMemory, Script, FunctionAgent]:
        ledger = EvidenceLedger.from_json(saved) if saved else None
        inner = memories(session_id="p", token_limit=100_000, async_database_uri=uri)
        memory = CapsuleMemory.from_defaults(inner, ledger=ledger)
        script = Script()
        return memory, script, agent_for(memory, Everything(), script, budget=150)

    memory, script, agent = rebuilt(None)
    first = await ask(memory, agent, script, "Rule 0?",
                      call(("s1", "search", {"query": "Rule 0 hotels"})),
                      call(("c1", "cite", {"chunk_ids": ["n0"]})), say("Yes [n0]."))
    packet = tool_texts(first)[0]
    assert LONG[0].text not in packet and LONG[3].text not in packet  # budgeted

    memory, script, agent = rebuilt(memory.ledger.to_json())
    second = await ask(memory, agent, script, "Rule 3?",
                       call(("r1", "recall", {"chunk_ids": ["n3"]})), say("Yes [n3]."))
    earlier, recalled = tool_texts(second)
    assert LONG[0].text in earlier  # cited in part, whole once its question ended
    assert LONG[3].text in recalled  # kept whole beside the stored packet

    memory, script, agent = rebuilt(memory.ledger.to_json())
    both = call(("a", "search", {"query": "Rule 1"}), ("b", "recall", {"chunk_ids": ["n4"]}))
    third = await ask(memory, agent, script, "Rules 1 and 4?", both, say("[n4] and [n1]."))
    assert LONG[4].text in tool_text(third, "b")
    assert LONG[4].text not in tool_text(third, "a")  # budgeted, shown in part
    assert memory.ledger.questions == (0, 6, 10)
    assert set(memory.ledger.cited_ids()) == {"n1", "n4"}
    assert not any("capsa_evidence" in m.additional_kwargs for m in third)


@pytest.mark.parametrize("inner", ["memory", "buffer"])
async def test_small_inner_memories_bound_every_request_and_keep_what_was_cited(
        inner: str, memories: Callable[..., Memory]) -> None:
    wrapped: BaseMemory = (
        memories(session_id="small", token_limit=400, chat_history_token_ratio=0.5,
                             token_flush_size=100)
        if inner == "memory" else ChatMemoryBuffer.from_defaults(token_limit=300))
    memory = CapsuleMemory.from_defaults(wrapped)
    script = Script()
    agent = agent_for(memory, Lookup(), script)
    limit = memory.view_token_limit()
    assert limit is not None
    keys = ["hotel", "wifi", "meal"]
    for n in range(6):
        key = keys[n % 3]
        await ask(memory, agent, script, f"{key} {n}?",
                  call((f"s{n}", "search", {"query": key})),
                  call((f"c{n}", "cite", {"chunk_ids": [key]})),
                  say(f"Answer {n} [{key}] " + "and so on " * 20))
        for request in script.seen:
            assert sum(estimate_tokens(m.content or "") for m in request) <= limit
    assert len(memory.get_all()) == 6 * 6
    assert {e.evidence.chunk_id for e in memory.ledger.entries} == set(keys)
    recalled = await memory.arecall(keys)
    assert [e.content for e in recalled.evidence] == [NODES[k].text for k in keys]
