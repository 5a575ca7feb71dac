"""Citation capsules in LlamaIndex agents and chat engines, over the sample corpus."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import (
    ChatMessage,
    CitationBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import BaseMemory, Memory
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field

from capsa.capsule import CAPSULE_HEADER, Evidence, EvidenceLedger, estimate_tokens, render_evidence
from capsa.demo.corpus_source import DOCUMENTS, QUESTIONS
from capsa.errors import BudgetError
from capsa.llama_index.capsule_conversion import WHOLE_EVIDENCE_KEY, evidence
from capsa.llama_index.memory import (
    CapsuleMemory,
    CitationCapsuleBlock,
    capsule_cite_tool,
    capsule_recall_tool,
    capsule_retriever_tool,
)

# -- corpus, retriever, scripted model -------------------------------------------------------------


def _nodes() -> list[TextNode]:
    nodes: list[TextNode] = []
    for doc in DOCUMENTS:
        stem, heading, count = doc.name.rsplit(".", 1)[0], "", 0
        for block in doc.text.split("\n\n"):
            if len(block) < 80:
                heading = f"{heading}\n{block}".strip()
                continue
            nodes.append(
                TextNode(
                    id_=f"{stem}-{count:02d}-node-chunk",
                    text=f"{heading}\n{block}".strip(),
                    metadata={"title": doc.title, "source": doc.name},
                )
            )
            heading, count = "", count + 1
    return nodes


NODES = _nodes()
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = {"the", "and", "for", "what", "how", "who", "which", "does", "with", "much", "many"}


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class LexicalRetriever(BaseRetriever):
    """Top three nodes by shared query terms; ties broken by id."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        wanted = _terms(query_bundle.query_str)
        ranked = sorted(NODES, key=lambda n: (-len(wanted & _terms(n.text)), n.node_id))
        return [
            NodeWithScore(node=n, score=float(len(wanted & _terms(n.text)))) for n in ranked[:3]
        ]


def _answer_node(question) -> TextNode:
    return next(n for n in NODES if question.answer in n.text)


class Script:
    """Feeds scripted assistant messages and records what the model was sent."""

    def __init__(self) -> None:
        self.replies: list[ChatMessage] = []
        self.seen: list[list[ChatMessage]] = []

    def __call__(self, messages, **kwargs: Any) -> ChatMessage:
        self.seen.append([m.model_copy(deep=True) for m in messages])
        return self.replies.pop(0)

    def play(self, *replies: ChatMessage) -> None:
        self.replies, self.seen = list(replies), []


def _call(call_id: str, tool: str, **kwargs: Any) -> ChatMessage:
    block = ToolCallBlock(tool_call_id=call_id, tool_name=tool, tool_kwargs=kwargs)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def _say(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def _tool_texts(messages: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in messages if m.role == MessageRole.TOOL]


def _search_now(memory: CapsuleMemory, retriever: BaseRetriever, query: str) -> str:
    """What the search tool does inside a run, done by hand for the sync path."""
    found = [evidence(n) for n in retriever.retrieve(query)]
    memory.record_retrieval(found, tool="search")
    return render_evidence(found)


class ListMemory(BaseMemory):
    """The smallest `BaseMemory`: a list, to show `CapsuleMemory` wraps any memory."""

    messages: list[ChatMessage] = Field(default_factory=list)

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> ListMemory:
        return cls()

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return list(self.messages)

    def get_all(self) -> list[ChatMessage]:
        return list(self.messages)

    def put(self, message: ChatMessage) -> None:
        self.messages.append(message)

    def set(self, messages: list[ChatMessage]) -> None:
        self.messages = list(messages)

    def reset(self) -> None:
        self.messages = []


def _agent(memory: CapsuleMemory, script: Script) -> FunctionAgent:
    llm = MockFunctionCallingLLM(response_generator=script)
    tools = [memory.retriever_tool(LexicalRetriever(), name="search"), memory.cite_tool()]
    return FunctionAgent(tools=tools, llm=llm, streaming=False)


HOTEL, HOLD, SCANNER, STIPEND = QUESTIONS[0], QUESTIONS[4], QUESTIONS[5], QUESTIONS[14]

# Building a FunctionAgent makes llama-index-workflows walk the agent's attributes with
# inspect.getmembers, touching attributes pydantic has deprecated (`__fields__`,
# `model_computed_fields`); the warnings come from the framework, not from capsa.
_workflow_warning = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecationWarning"
)

# -- FunctionAgent with CapsuleMemory ----------------------------------------------------------


@_workflow_warning
async def test_five_question_conversation_through_a_function_agent(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="northwind"))
    script = Script()
    agent = _agent(memory, script)
    hotel, hold = _answer_node(HOTEL), _answer_node(HOLD)
    scanner, stipend = _answer_node(SCANNER), _answer_node(STIPEND)

    script.play(
        _call("q1-s", "search", query=HOTEL.question),
        _call("q1-c", "cite", chunk_ids=[hotel.node_id]),
        _say(f"EUR 230 [{hotel.node_id}]."),
    )
    await agent.run(HOTEL.question, memory=memory)
    assert [m.role for m in script.seen[0]] == [MessageRole.USER]
    assert hotel.text in _tool_texts(script.seen[1])[0]
    assert _tool_texts(script.seen[2])[-1] == f"Recorded 1 citation: {hotel.node_id}."

    damaged = hotel.node_id.replace("-node", "")  # a hyphen group lost in copying
    script.play(
        _call("q2-s", "search", query=HOLD.question),
        _call("q2-c", "cite", chunk_ids=[hold.node_id, damaged]),
        _say("Renata Duarte."),
    )
    await agent.run(HOLD.question, memory=memory)
    (q1_return,) = _tool_texts(script.seen[0])  # Q1's cite exchange left with Q1
    assert q1_return.startswith(f'<chunk id="{hotel.node_id}"') and hotel.text in q1_return
    assert "<not-shown" in q1_return
    assert _tool_texts(script.seen[2])[-1] == (
        f"Recorded 2 citations: {hold.node_id}, {hotel.node_id}."
    )

    script.play(_say(f"As before, EUR 230 [{hotel.node_id}]."))
    await agent.run("Remind me of the hotel cap?", memory=memory)
    returns = [t for t in _tool_texts(script.seen[0]) if not t.startswith("Recorded")]
    assert returns[0] == q1_return  # fixed once its question ended
    assert hold.text in returns[1]

    script.play(
        _call("q4-s", "search", query=SCANNER.question), _say(f"EUR 1475 [{scanner.node_id}]")
    )
    await agent.run(SCANNER.question, memory=memory)

    script.play(
        _call("q5-s", "search", query=STIPEND.question),
        _call("q5-c", "cite", chunk_ids=[stipend.node_id]),
        _say("EUR 30."),
    )
    await agent.run(STIPEND.question, memory=memory)
    returns = [t for t in _tool_texts(script.seen[0]) if not t.startswith("Recorded")]
    assert returns[0] == q1_return
    for node, shown_in in ((hotel, 0), (hold, 1), (scanner, 2)):
        assert node.text in returns[shown_in]
    assert stipend.text in _tool_texts(script.seen[1])[-1]

    stored = await memory.aget_all()
    assert not any("<not-shown" in t for t in _tool_texts(stored))
    assert hotel.text in _tool_texts(stored)[0]
    users = [i for i, m in enumerate(stored) if m.role == MessageRole.USER]
    ledger = EvidenceLedger.from_json(memory.ledger.to_json())
    assert ledger == memory.ledger
    assert ledger.ended_at == len(stored)
    cited = {e.evidence.chunk_id: e.cited_in for e in ledger.entries if e.cited_in}
    assert cited == {
        hotel.node_id: (users[0], users[1], users[2]),
        hold.node_id: (users[1],),
        scanner.node_id: (users[3],),
        stipend.node_id: (users[4],),
    }


@_workflow_warning
async def test_capsule_memory_adopts_history_it_has_no_ledger_for(sql_memory):
    plain = sql_memory(session_id="lost")
    script = Script()
    first = CapsuleMemory.from_defaults(plain)
    agent = _agent(first, script)
    script.play(_call("s1", "search", query=HOTEL.question), _say("EUR 230"))
    await agent.run(HOTEL.question, memory=first)
    rebuilt = CapsuleMemory.from_defaults(plain)  # the ledger was not carried over
    agent = _agent(rebuilt, script)
    script.play(_say("ok"))
    await agent.run("follow-up", memory=rebuilt)
    (earlier,) = _tool_texts(script.seen[0])
    assert earlier.startswith("<not-shown")
    assert all(n.node.node_id in earlier for n in LexicalRetriever().retrieve(HOTEL.question))


@_workflow_warning
async def test_capsule_memory_resumes_with_a_carried_ledger(sql_memory):
    plain = sql_memory(session_id="carried")
    script = Script()
    first = CapsuleMemory.from_defaults(plain)
    hotel = _answer_node(HOTEL)
    script.play(_call("s1", "search", query=HOTEL.question), _say(f"EUR 230 [{hotel.node_id}]"))
    await _agent(first, script).run(HOTEL.question, memory=first)
    saved = first.ledger.to_json()
    rebuilt = CapsuleMemory.from_defaults(plain, ledger=EvidenceLedger.from_json(saved))
    script.play(_say("ok"))
    await _agent(rebuilt, script).run("thanks", memory=rebuilt)
    assert _tool_texts(script.seen[0])[0].startswith(f'<chunk id="{hotel.node_id}"')


def test_capsule_memory_sync_path_compacts_and_keeps_storage():
    memory = CapsuleMemory.from_defaults(ListMemory())
    hotel = _answer_node(HOTEL)
    memory.put(ChatMessage(role=MessageRole.USER, content=HOTEL.question))
    output = _search_now(memory, LexicalRetriever(), HOTEL.question)
    memory.put_messages(
        [
            _call("s1", "search", query=HOTEL.question),
            ChatMessage(
                role=MessageRole.TOOL,
                content=output,
                additional_kwargs={"tool_call_id": "s1"},
            ),
            ChatMessage(
                role=MessageRole.ASSISTANT,
                blocks=[
                    TextBlock(text="EUR 230."),
                    CitationBlock(
                        cited_content=HOTEL.answer,
                        source="travel-policy.pdf",
                        title="Travel and Expense Policy",
                        additional_location_info={},
                    ),
                ],
            ),
        ]
    )
    assert memory.ledger.cited_ids(0) == (hotel.node_id,)
    memory.put(ChatMessage(role=MessageRole.USER, content="and?"))
    view, stored = memory.get(), memory.get_all()
    assert view[2].content.startswith(f'<chunk id="{hotel.node_id}"')
    assert stored[2].content == output
    assert view[0] is stored[0] or view[0] == stored[0]


def test_capsule_memory_sends_a_chunk_searched_again_as_a_reference():
    memory = CapsuleMemory.from_defaults(ListMemory())
    hotel = _answer_node(HOTEL)
    outputs = []
    for turn, question in enumerate((HOTEL.question, "Same cap in every city?")):
        memory.put(ChatMessage(role=MessageRole.USER, content=question))
        outputs.append(_search_now(memory, LexicalRetriever(), HOTEL.question))
        step = [
            _call(f"s{turn}", "search", query=HOTEL.question),
            ChatMessage(
                role=MessageRole.TOOL,
                content=outputs[-1],
                additional_kwargs={"tool_call_id": f"s{turn}"},
            ),
        ]
        if turn == 0:  # answered and ended; the second question is still in progress
            memory.cite([hotel.node_id])
            memory.put_messages([*step, _say("EUR 230.")])
        else:
            for message in step:
                memory.put(message)
    earlier, current = _tool_texts(memory.get())
    assert hotel.text in earlier
    assert f'<chunk id="{hotel.node_id}" shown="earlier"/>' in current
    assert hotel.text not in current
    assert _tool_texts(memory.get_all()) == outputs


def _figure() -> tuple[TextNode, BaseRetriever]:
    """A chunk whose figure is a picture (``picture_refs``), and a retriever that finds it."""
    node = TextNode(
        id_="notice-figure-node-0001",
        text="Closure dates are in the figure.",
        metadata={"title": "Office Notice", "picture_refs": ["#/pictures/0"]},
    )

    class One(BaseRetriever):
        def _retrieve(self, query_bundle):
            return [NodeWithScore(node=node, score=1.0)]

    return node, One()


def test_capsule_memory_reattaches_cited_pictures():
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
    node, one = _figure()
    memory = CapsuleMemory.from_defaults(ListMemory())
    memory.fetch_picture = lambda picture: png
    memory.put(ChatMessage(role=MessageRole.USER, content="closures?"))
    output = _search_now(memory, one, "closures")
    memory.put_messages(
        [
            _call("s1", "search", query="closures"),
            ChatMessage(
                role=MessageRole.TOOL,
                content=output,
                additional_kwargs={"tool_call_id": "s1"},
            ),
            _say(f"See [{node.node_id}]."),
        ]
    )
    memory.put(ChatMessage(role=MessageRole.USER, content="and?"))
    view = memory.get()
    assert [m.role for m in view] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.USER,
    ]
    label, image = view[3].blocks
    assert isinstance(label, TextBlock) and f"[{node.node_id}]" in label.text
    assert isinstance(image, ImageBlock) and image.image_mimetype == "image/png"
    assert len(memory.get_all()) == 5


def test_capsule_memory_reset_forgets_fetched_pictures():
    """After `reset` the next conversation's first question fetches its own pictures."""
    node, one = _figure()
    user = {"name": "alice"}
    memory = CapsuleMemory.from_defaults(ListMemory())
    memory.fetch_picture = lambda picture: b"\x89PNG\r\n\x1a\n" + user["name"].encode()
    sent = {}
    for name in ("alice", "bob"):
        user["name"] = name
        memory.reset()
        memory.put(ChatMessage(role=MessageRole.USER, content="closures?"))
        output = _search_now(memory, one, "closures")
        memory.put_messages(
            [
                _call("s1", "search", query="closures"),
                ChatMessage(
                    role=MessageRole.TOOL, content=output, additional_kwargs={"tool_call_id": "s1"}
                ),
                _say(f"See [{node.node_id}]."),
            ]
        )
        memory.put(ChatMessage(role=MessageRole.USER, content="and?"))
        (image,) = [b for m in memory.get() for b in m.blocks if isinstance(b, ImageBlock)]
        sent[name] = image.resolve_image().read()
    assert sent["alice"].endswith(b"alice") and sent["bob"].endswith(b"bob")


def test_capsule_memory_set_keeps_the_ledger_and_reset_clears_it():
    memory = CapsuleMemory.from_defaults(ListMemory())
    memory.put(ChatMessage(role=MessageRole.USER, content="hi"))
    memory.record_retrieval([evidence(n) for n in LexicalRetriever().retrieve("hotel")], tool="s")
    history = memory.get_all()
    memory.set(history)
    assert memory.ledger.question == 0 and memory.ledger.retrieved_ids()
    assert memory.ledger.evidence_tools == ("s",)
    memory.reset()
    assert memory.ledger == EvidenceLedger(evidence_tools=("s",)) and memory.get_all() == []


# -- CitationCapsuleBlock with a chat engine ----------------------------------------------------


def test_capsule_block_reinjects_cited_evidence_into_a_chat_engine(sql_memory):
    block = CitationCapsuleBlock()
    memory = sql_memory(session_id="engine", memory_blocks=[block])
    llm = MockLLM()
    engine = ContextChatEngine.from_defaults(retriever=LexicalRetriever(), memory=memory, llm=llm)
    hotel = _answer_node(HOTEL)
    first = engine.chat(HOTEL.question)
    block.record(first, cited=[hotel.node_id])
    assert block.ledger.cited_ids(0) == (hotel.node_id,)

    second = engine.chat("Who issues a litigation hold?")
    prompt = second.response  # MockLLM echoes the whole prompt it was given
    capsule = prompt.split("<cited_evidence>")[1].split("</cited_evidence>")[0]
    assert capsule.strip().startswith(CAPSULE_HEADER)
    assert hotel.text in capsule
    uncited = [n.node.text for n in first.source_nodes if n.node.node_id != hotel.node_id]
    assert uncited and all(text not in capsule for text in uncited)


async def test_capsule_block_reads_markers_and_truncates_oldest_groups_first():
    block = CitationCapsuleBlock()
    hotel, hold = _answer_node(HOTEL), _answer_node(HOLD)

    class Answer:
        def __init__(self, text, node):
            self.response = text
            self.source_nodes = [NodeWithScore(node=node, score=1.0)]

    block.record(Answer(f"EUR 230 [{hotel.node_id}]", hotel))
    block.record(Answer(f"Renata Duarte [{hold.node_id}] [not-an-id]", hold))
    assert block.ledger.cited_ids(0) == (hotel.node_id,)
    assert block.ledger.cited_ids(2) == (hold.node_id,)
    full = await block.aget()
    assert full.index(hold.text) < full.index(hotel.text)
    shorter = await block.atruncate(full, len(hotel.text) // 4)
    assert shorter is not None and hold.text in shorter and hotel.text not in shorter
    assert hotel.node_id in shorter  # the omission is named
    assert await block.atruncate(full, 10**6) is None


# -- app shapes ---------------------------------------------------------------------------------


def test_capsule_block_lets_no_evidence_cross_into_the_next_conversation(sql_memory):
    block = CitationCapsuleBlock()
    memory = sql_memory(session_id="engine", memory_blocks=[block])
    engine = ContextChatEngine.from_defaults(
        retriever=LexicalRetriever(), memory=memory, llm=MockLLM()
    )
    salary = _answer_node(HOTEL)
    block.record(engine.chat(HOTEL.question), cited=[salary.node_id])
    assert salary.text in engine.chat("and?").response.split("<cited_evidence>")[1]

    engine.reset()  # the next user's conversation
    prompt = engine.chat("What can you tell me?").response
    assert "<cited_evidence>" not in prompt and salary.text not in prompt.split("What can")[0]
    assert block.ledger.entries == ()


@_workflow_warning
async def test_one_agent_serves_many_sessions_through_the_runs_memory(sql_memory):
    script = Script()
    agent = FunctionAgent(
        tools=[
            capsule_retriever_tool(LexicalRetriever(), name="search"),
            capsule_cite_tool(),
            capsule_recall_tool(),
        ],
        llm=MockFunctionCallingLLM(response_generator=script),
        streaming=False,
    )
    alice = CapsuleMemory.from_defaults(sql_memory(session_id="alice"))
    bob = CapsuleMemory.from_defaults(sql_memory(session_id="bob"))
    hotel, hold = _answer_node(HOTEL), _answer_node(HOLD)
    script.play(
        _call("a1", "search", query=HOTEL.question),
        _call("a2", "cite", chunk_ids=[hotel.node_id]),
        _say("EUR 230."),
    )
    await agent.run(HOTEL.question, memory=alice)
    script.play(
        _call("b1", "search", query=HOLD.question),
        _call("b2", "cite", chunk_ids=[hold.node_id]),
        _say("Renata Duarte."),
    )
    await agent.run(HOLD.question, memory=bob)
    assert alice.ledger.cited_ids(0) == (hotel.node_id,)
    assert bob.ledger.cited_ids(0) == (hold.node_id,)
    assert alice.ledger.evidence_tools == ("search",)


@_workflow_warning
async def test_recall_brings_back_an_uncited_chunk_for_a_late_citation(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="late"))
    script = Script()
    tools = [
        memory.retriever_tool(LexicalRetriever(), name="search"),
        memory.cite_tool(),
        memory.recall_tool(),
    ]
    agent = FunctionAgent(
        tools=tools, llm=MockFunctionCallingLLM(response_generator=script), streaming=False
    )
    hotel = _answer_node(HOTEL)
    late = next(n.node for n in LexicalRetriever().retrieve(HOTEL.question) if n.node is not hotel)
    script.play(
        _call("s1", "search", query=HOTEL.question),
        _call("c1", "cite", chunk_ids=[hotel.node_id]),
        _say("EUR 230."),
    )
    await agent.run(HOTEL.question, memory=memory)
    script.play(
        _call("r1", "recall", chunk_ids=[late.node_id]),
        _call("c2", "cite", chunk_ids=[late.node_id]),
        _say("Also this."),
    )
    await agent.run("What else?", memory=memory)
    assert late.node_id in _tool_texts(script.seen[0])[0]  # named in Q1's receipt
    assert late.text not in _tool_texts(script.seen[0])[0]
    assert late.text in _tool_texts(script.seen[1])[-1]  # recalled whole
    assert _tool_texts(script.seen[2])[-1] == f"Recorded 1 citation: {late.node_id}."
    script.play(_say("ok"))
    await agent.run("thanks", memory=memory)
    assert late.text in "\n".join(_tool_texts(script.seen[0]))  # stays visible where recalled


# -- ended questions' cite exchanges off the view --------------------------------------------------


def _call_ids(message: ChatMessage) -> set[str]:
    ids = {b.tool_call_id or "" for b in message.blocks if isinstance(b, ToolCallBlock)}
    return ids | {c["id"] for c in message.additional_kwargs.get("tool_calls") or ()}


def _unpaired(messages: list[ChatMessage]) -> set[str]:
    calls = set().union(*(_call_ids(m) for m in messages))
    returns = {
        m.additional_kwargs.get("tool_call_id") for m in messages if m.role == MessageRole.TOOL
    }
    return calls ^ returns


def _cite_acks(messages: list[ChatMessage]) -> list[str]:
    return [t for t in _tool_texts(messages) if t.startswith("Recorded")]


async def _three_questions(memory: CapsuleMemory) -> list[list[ChatMessage]]:
    script = Script()
    agent = _agent(memory, script)
    requests: list[list[ChatMessage]] = []
    for k, question in enumerate((HOTEL, HOLD, STIPEND), 1):
        node = _answer_node(question)
        script.play(
            _call(f"q{k}-s", "search", query=question.question),
            _call(f"q{k}-c", "cite", chunk_ids=[node.node_id]),
            _say(f"Answer {k} [{node.node_id}]."),
        )
        await agent.run(question.question, memory=memory)
        requests += script.seen
    return requests


@_workflow_warning
async def test_capsule_memory_takes_ended_questions_cite_exchanges_off_the_view(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="cites"))
    requests = await _three_questions(memory)
    assert [len(_cite_acks(r)) for r in requests] == [0, 0, 1] * 3  # only the current one's
    assert all(_unpaired(r) == set() for r in requests)
    last_first = requests[6]
    assert not any(b.tool_name == "cite" for m in last_first for b in m.blocks
                   if isinstance(b, ToolCallBlock))  # fmt: skip
    stored = await memory.aget_all()
    assert len(_cite_acks(stored)) == 3  # the store keeps every exchange
    assert sum(1 for m in stored for b in m.blocks if isinstance(b, ToolCallBlock)) == 6


@_workflow_warning
async def test_capsule_memory_view_keeps_the_previous_reads_prefix_when_cites_leave(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="prefix"))
    requests = await _three_questions(memory)
    assert len(requests) == 9
    for n in range(1, len(requests)):
        before, after = requests[n - 1], requests[n]
        if n % 3:  # the same question: the whole read leads the next one
            assert after[: len(before)] == before
        else:  # a question ended: everything up to its own message stays as it was
            asked = max(i for i, m in enumerate(before) if m.role == MessageRole.USER)
            assert after[: asked + 1] == before[: asked + 1]


@_workflow_warning
async def test_capsule_memory_keep_cite_calls_keeps_them_in_the_view(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="kept"))
    memory.keep_cite_calls = True
    requests = await _three_questions(memory)
    assert len(_cite_acks(requests[-1])) == 3
    assert all(_unpaired(r) == set() for r in requests)


def _returned(call_id: str, text: str) -> ChatMessage:
    kwargs = {"tool_call_id": call_id}
    return ChatMessage(role=MessageRole.TOOL, content=text, additional_kwargs=kwargs)


def test_capsule_memory_removes_a_raw_cite_call_beside_a_search_call():
    memory = CapsuleMemory.from_defaults(ListMemory())
    hotel = _answer_node(HOTEL)
    memory.put(ChatMessage(role=MessageRole.USER, content=HOTEL.question))
    output = _search_now(memory, LexicalRetriever(), HOTEL.question)
    memory.cite([hotel.node_id])
    raw = [
        {"id": "s1", "type": "function", "function": {"name": "search", "arguments": "{}"}},
        {"id": "c1", "type": "function", "function": {"name": "cite", "arguments": "{}"}},
    ]
    memory.put_messages(
        [
            ChatMessage(role=MessageRole.ASSISTANT, additional_kwargs={"tool_calls": raw}),
            _returned("s1", output),
            _returned("c1", "Recorded."),
            _say(f"EUR 230 [{hotel.node_id}]."),
        ]
    )
    memory.put(ChatMessage(role=MessageRole.USER, content="and?"))
    view, stored = memory.get(), memory.get_all()
    assert view[1].additional_kwargs["tool_calls"] == raw[:1]
    assert [m.role for m in view] == [
        MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT,
        MessageRole.USER,
    ]  # fmt: skip
    assert _unpaired(view) == set()
    assert stored[1].additional_kwargs["tool_calls"] == raw
    assert len(stored) == 6


def _cache_points(messages: list[ChatMessage]) -> list[int]:
    return [n for n, m in enumerate(messages)
            if any(type(b).__name__ == "CachePoint" for b in m.blocks)]


@_workflow_warning
async def test_capsule_memory_cache_breakpoint_ends_the_previous_question(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="cached"))
    memory.cache_breakpoint = True
    requests = await _three_questions(memory)
    asked = [[n for n, m in enumerate(r) if m.role == MessageRole.USER] for r in requests]
    assert [_cache_points(r) for r in requests[:3]] == [[], [], []]  # no earlier question
    assert all(_cache_points(r) == [a[-2]] for r, a in zip(requests[3:], asked[3:], strict=True))
    marked = requests[3][asked[3][-2]]
    assert marked.content == HOTEL.question  # the text as it was, the point after it
    assert _cache_points(await memory.aget_all()) == []  # the store is never marked


@_workflow_warning
async def test_capsule_memory_without_cache_breakpoint_marks_nothing(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="plain"))
    requests = await _three_questions(memory)
    assert all(_cache_points(r) == [] for r in requests)


# -- from_defaults takes exactly the constructor's options -------------------------------------


def _every_option() -> dict[str, Any]:
    def fetch(_picture: Any) -> bytes | None:
        return None

    return {
        "ledger": EvidenceLedger().with_evidence_tools(["search"]),
        "evidence_tools": frozenset({"lookup"}),
        "recall_tool_name": "bring_back",
        "cite_tool_name": "quote",
        "keep_cite_calls": True,
        "fetch_picture": fetch,
        "max_capsule_tokens": 150,
        "tokenizer": len,
        "cache_breakpoint": True,
        "low_water": 0.5,
    }


def test_from_defaults_takes_every_constructor_option_with_an_inner_memory():
    options = _every_option()
    assert set(options) == set(CapsuleMemory.model_fields) - {"memory"}
    inner = ListMemory()
    built = CapsuleMemory.from_defaults(inner, **options)
    direct = CapsuleMemory(memory=inner, **options)
    for name, value in options.items():
        assert getattr(built, name) == value == getattr(direct, name), name
    assert built.memory is inner


async def test_from_defaults_takes_every_constructor_option_without_an_inner_memory():
    options = _every_option()
    built = CapsuleMemory.from_defaults(session_id="opts", token_limit=900, **options)
    try:
        for name, value in options.items():
            assert getattr(built, name) == value, name
        assert isinstance(built.memory, Memory)
        assert built.memory.session_id == "opts"
        assert built.memory.token_limit == 900
    finally:
        engine = built.memory.sql_store._async_engine  # type: ignore[attr-defined]
        if engine is not None:
            await engine.dispose()


def test_from_defaults_refuses_an_unknown_option_by_name():
    with pytest.raises(TypeError, match="bogus_option"):
        CapsuleMemory.from_defaults(ListMemory(), bogus_option=1)
    with pytest.raises(TypeError, match="bogus_option"):
        CapsuleMemory.from_defaults(bogus_option=1)


def test_from_defaults_refuses_memory_options_beside_an_inner_memory():
    with pytest.raises(TypeError, match="token_limit"):
        CapsuleMemory.from_defaults(ListMemory(), token_limit=150)



# -- nothing heavy on the event loop ---------------------------------------------------------------


@_workflow_warning
async def test_a_twenty_question_chat_compacts_off_the_event_loop(monkeypatch):
    import asyncio
    import threading
    import time

    import capsa.llama_index.memory as memory_module

    threads: list[int] = []
    real = memory_module.compact

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(memory_module, "compact", recorded)
    gaps: list[float] = []  # read, never asserted: tests do not assert wall-clock times
    stop = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(tick())
    memory = CapsuleMemory.from_defaults(ListMemory())
    script = Script()
    agent = _agent(memory, script)
    questions = [*QUESTIONS, *QUESTIONS[:5]][:20]
    for n, question in enumerate(questions):
        node = _answer_node(question)
        script.play(
            _call(f"s{n}", "search", query=question.question),
            _call(f"c{n}", "cite", chunk_ids=[node.node_id]),
            _say(f"ok [{node.node_id}]"),
        )
        await agent.run(question.question, memory=memory)
    stop.set()
    await ticking
    assert len(threads) >= 20 * 3
    assert threading.get_ident() not in threads
    assert not memory.ledger.in_progress
    assert gaps  # the ticker ran throughout
    print(f"longest loop gap over 20 questions: {max(gaps) * 1000:.1f} ms")


# -- a bounded view that keeps the cache -----------------------------------------------------------


class LimitedListMemory(ListMemory):
    """A list memory that declares a token limit, as `Memory` does."""

    token_limit: int = 900


def _view_tokens(messages: list[ChatMessage]) -> int:
    from capsa.capsule import estimate_tokens

    return sum(
        estimate_tokens("".join(getattr(b, "text", "") or "" for b in m.blocks)) for m in messages
    )


@_workflow_warning
async def test_the_view_honours_the_inner_token_limit_and_moves_in_steps():
    memory = CapsuleMemory.from_defaults(LimitedListMemory())
    script = Script()
    agent = _agent(memory, script)
    firsts: list[str] = []
    questions = [*QUESTIONS, *QUESTIONS[:5]][:20]
    for n, question in enumerate(questions):
        node = _answer_node(question)
        script.play(
            _call(f"s{n}", "search", query=question.question),
            _call(f"c{n}", "cite", chunk_ids=[node.node_id]),
            _say(f"ok [{node.node_id}]"),
        )
        await agent.run(question.question, memory=memory)
        # the inner memory's bound (the agent's scratchpad of the running question is
        # outside any memory, as with a plain Memory)
        assert _view_tokens(await memory.aget()) <= 900
        first_user = next(m for m in script.seen[0] if m.role == MessageRole.USER)
        firsts.append(first_user.content or "")
    moves = [n for n in range(1, 20) if firsts[n] != firsts[n - 1]]
    assert moves  # the bound was reached
    assert len(moves) <= 20 // 3  # the cached prefix moved at most once per three questions
    assert len(memory.get_all()) > len(memory.get())  # the stored history keeps everything
    assert "reason=\"token_limit\"" in (memory.get()[0].content or "")


class WiderListMemory(ListMemory):
    """A list memory that declares a token limit of 1500."""

    token_limit: int = 1500


@_workflow_warning
async def test_thirty_questions_keep_the_bound_and_move_the_prefix_at_least_three_apart():
    # bound 1500: a step leaves (1 - LOW_WATER) * 1500 = 600 tokens of headroom, and
    # this chat's questions compact to about 200 tokens each, so three fit before the
    # next step
    memory = CapsuleMemory.from_defaults(WiderListMemory())
    script = Script()
    agent = _agent(memory, script)
    firsts: list[str] = []
    for n in range(30):
        question = QUESTIONS[n % len(QUESTIONS)]
        node = _answer_node(question)
        script.play(
            _call(f"s{n}", "search", query=question.question),
            _call(f"c{n}", "cite", chunk_ids=[node.node_id]),
            _say(f"ok [{node.node_id}]"),
        )
        await agent.run(question.question, memory=memory)
        assert _view_tokens(await memory.aget()) <= 1500
        first_user = next(m for m in script.seen[0] if m.role == MessageRole.USER)
        firsts.append(first_user.content or "")
    moves = [n for n in range(1, 30) if firsts[n] != firsts[n - 1]]
    assert len(moves) >= 2  # the bound was reached, more than once
    assert all(b - a >= 3 for a, b in itertools.pairwise(moves))


async def test_a_memory_token_limit_bounds_the_view_at_its_chat_history_share():
    memory = CapsuleMemory.from_defaults(token_limit=1500, session_id="limit")
    try:
        assert memory.view_token_limit() == 1050  # Memory keeps 0.7 of it for chat history
    finally:
        engine = memory.memory.sql_store._async_engine  # type: ignore[attr-defined]
        if engine is not None:
            await engine.dispose()


# -- a memory that summarises keeps the citations of a question it splits ------------------------


class SummarisingListMemory(ListMemory):
    """Keeps the newest `keep` messages, the rest replaced by one summary message."""

    keep: int = 4

    def _shorten(self) -> None:
        if len(self.messages) > self.keep + 1:
            summary = ChatMessage(role=MessageRole.USER, content="Summary: policies discussed.")
            self.messages = [summary, *self.messages[-self.keep :]]

    def put_messages(self, messages: list[ChatMessage]) -> None:
        self.messages.extend(messages)
        self._shorten()


@_workflow_warning
async def test_a_question_a_summarising_memory_splits_keeps_its_citations():
    memory = CapsuleMemory.from_defaults(SummarisingListMemory())
    script = Script()
    agent = _agent(memory, script)
    hotel, hold = _answer_node(HOTEL), _answer_node(HOLD)
    for n, (question, node) in enumerate(((HOTEL, hotel), (HOLD, hold))):
        script.play(
            _call(f"s{n}", "search", query=question.question),
            _call(f"c{n}", "cite", chunk_ids=[node.node_id]),
            _say(f"ok [{node.node_id}]"),
        )
        await agent.run(question.question, memory=memory)
    script.play(_say("Noted."))
    await agent.run("thanks", memory=memory)
    stored = memory.get_all()
    assert (stored[0].content or "").startswith("Summary")  # it did summarise
    assert not any(hotel.text in (m.content or "") for m in stored)  # the first return is gone
    assert {hotel.node_id, hold.node_id} <= set(memory.ledger.carried)
    from capsa.capsule import recall

    found = recall([hotel.node_id], [], memory.ledger, owned_tools=memory.owned_tools)
    assert [e.content for e in found.evidence] == [hotel.text]  # whole, from the ledger


# -- budgeted evidence -----------------------------------------------------------------------------


def _budgeted_agent(memory: CapsuleMemory, script: Script) -> FunctionAgent:
    tools = [
        memory.retriever_tool(LexicalRetriever(), name="search", budget=150),
        memory.cite_tool(),
        memory.recall_tool(),
    ]
    llm = MockFunctionCallingLLM(response_generator=script)
    return FunctionAgent(tools=tools, llm=llm, streaming=False)


async def _budgeted_chat(memory: CapsuleMemory) -> tuple[list[list[list[ChatMessage]]], list[Any]]:
    """Q1 searches (a packet), recalls a named chunk, cites; Q2 recalls another; Q3 reads."""
    script, seen = Script(), []
    agent = _budgeted_agent(memory, script)
    found = [n.node for n in LexicalRetriever().retrieve(HOTEL.question)]
    answer, other, third = found[0], found[1], found[2]
    script.play(
        _call("s1", "search", query=HOTEL.question),
        _call("r1", "recall", chunk_ids=[other.node_id]),
        _call("c1", "cite", chunk_ids=[answer.node_id, other.node_id]),
        _say("EUR 230."),
    )
    await agent.run(HOTEL.question, memory=memory)
    seen.append(script.seen)
    script.play(
        _call("r2", "recall", chunk_ids=[third.node_id]),
        _call("c2", "cite", chunk_ids=[third.node_id]),
        _say("From 1 April."),
    )
    await agent.run("What changed in April?", memory=memory)
    seen.append(script.seen)
    script.play(_say("ok"))
    await agent.run("thanks", memory=memory)
    seen.append(script.seen)
    return seen, found


@pytest.mark.parametrize("budget", [34, 60, 100, 150, 300])
async def test_the_budgeted_tool_returns_at_most_its_budget(budget):
    memory = CapsuleMemory.from_defaults(ListMemory())
    tool = memory.retriever_tool(LexicalRetriever(), name="search", budget=budget)

    class Store:  # a run's store without a memory: the tool falls back to this one
        async def get(self, key: str, default: Any = None) -> Any:
            return default

    class Ctx:
        store = Store()

    for question in QUESTIONS:
        text = await tool.async_fn(question.question, Ctx())
        assert estimate_tokens(text) <= budget


def test_the_budgeted_tool_refuses_a_budget_below_the_floor():
    memory = CapsuleMemory.from_defaults(ListMemory())
    with pytest.raises(BudgetError, match=r"budget=33 tokens .* at least 34"):
        memory.retriever_tool(LexicalRetriever(), name="search", budget=33)


@_workflow_warning
async def test_budgeted_search_returns_a_packet_smaller_than_every_chunk_whole(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="budgeted-packet"))
    seen, found = await _budgeted_chat(memory)
    packet = _tool_texts(seen[0][1])[-1]
    whole = render_evidence([evidence(NodeWithScore(node=n)) for n in found])
    assert len(packet) < len(whole) / 2
    assert f'<part id="{found[0].node_id}"' in packet and found[0].text not in packet
    assert all(n.node_id in packet for n in found)  # every chunk named, so recallable


@_workflow_warning
async def test_budgeted_chunks_come_back_whole_through_recall_now_and_later(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="budgeted-recall"))
    seen, found = await _budgeted_chat(memory)
    assert found[1].text in _tool_texts(seen[0][2])[-1]  # same question: from the ledger
    assert found[2].text in _tool_texts(seen[1][1])[-1]  # next question: from storage
    assert _tool_texts(seen[1][2])[-1] == f"Recorded 1 citation: {found[2].node_id}."


@_workflow_warning
async def test_a_cited_part_shows_whole_once_its_question_ended(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="budgeted-ended"))
    seen, found = await _budgeted_chat(memory)
    later = "\n".join(_tool_texts(seen[2][0]))
    assert found[0].text in later  # cited as a part in Q1, whole on the wire since
    assert found[1].text in later


@_workflow_warning
async def test_budgeted_returns_keep_chunks_whole_in_storage_never_in_the_view(sql_memory):
    memory = CapsuleMemory.from_defaults(sql_memory(session_id="budgeted-storage"))
    seen, found = await _budgeted_chat(memory)
    stored = next(m for m in memory.get_all() if m.role == MessageRole.TOOL)
    kept = stored.additional_kwargs[WHOLE_EVIDENCE_KEY]
    assert [e["content"] for e in kept] == [n.text for n in found]
    sent = [m for run in seen for request in run for m in request]
    assert not any(WHOLE_EVIDENCE_KEY in m.additional_kwargs for m in sent)


# -- carried is bounded ----------------------------------------------------------------------------


def _carrying(count: int) -> EvidenceLedger:
    """A ledger whose shortened history forgot `count` cited chunks (their returns gone)."""
    chunks = [Evidence(chunk_id=f"old-{i}", content=f"Old clause {i}.", document_id="old")
              for i in range(count)]
    ledger = EvidenceLedger().begin_question(0).record_retrieval(chunks, tool="search")
    return ledger.record_citations([c.chunk_id for c in chunks]).end_question(4).reanchor(0)


@_workflow_warning
async def test_capsule_memory_prunes_what_a_shortening_carried_when_a_question_ends():
    before = _carrying(40).carried
    memory = CapsuleMemory.from_defaults(ListMemory(), ledger=_carrying(40))
    script = Script()
    script.play(_call("s1", "search", query=HOTEL.question), _say("EUR 230."))
    await _agent(memory, script).run(HOTEL.question, memory=memory)
    assert len(before) == 40 and memory.ledger.carried == before[8:]  # the newest 32
    assert memory.ledger.entry(before[7]) is None and memory.ledger.entry(before[8]) is not None
