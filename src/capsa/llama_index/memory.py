"""Citation capsules for LlamaIndex: agent memory and a chat-engine memory block.

Two opposite problems, one core:

- Agents (`FunctionAgent`, `ReActAgent`) store every tool result in memory and
  read all of it back on every step, so old retrievals pile up. `CapsuleMemory`
  wraps a memory and returns the compacted view from `get`/`aget` (earlier
  evidence only as a capsule of what the answers cited), while `get_all` and the
  store keep the real history.
- Chat engines (`ContextChatEngine`, `CondensePlusContextChatEngine`) store only
  user and assistant text, so the evidence earlier answers cited is gone by the
  next turn. `CitationCapsuleBlock` is a `Memory` block that puts it back.

Both keep an `EvidenceLedger` (``.ledger``); persist it with ``ledger.to_json()``
next to the chat store and pass it back when rebuilding the memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import (
    ChatMessage,
    CitationBlock,
    ContentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.memory import BaseMemory, Memory
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.core.tools import FunctionTool
from llama_index_instrumentation import get_dispatcher
from pydantic import Field

from capsa.capsule import (
    CitationRef,
    Compaction,
    Evidence,
    EvidenceLedger,
    ImagePart,
    Message,
    OtherPart,
    Part,
    PictureFetcher,
    Role,
    TextPart,
    ToolCall,
    build_capsule,
    cite_ids,
    compact_with_report,
    parse_citations,
    record_messages,
    render_evidence,
)

__all__ = ["CapsuleCompactedEvent", "CapsuleMemory", "CitationCapsuleBlock"]

_dispatcher = get_dispatcher(__name__)

_ROLES: dict[MessageRole, Role] = {
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
}

_RETRIEVER_DESCRIPTION = (
    "Search the knowledge base. Each result starts with its [chunk_id] and source. "
    "After answering from the results, call the cite tool with the chunk ids your "
    "answer relies on."
)
_CITE_DESCRIPTION = (
    "Record which retrieved chunks your answer relies on. Pass their chunk ids exactly as "
    "shown in search results or in the evidence capsule. Call it once per answer."
)


class CapsuleCompactedEvent(BaseEvent):
    """What one compaction kept and dropped, for instrumentation handlers."""

    boundary: int
    receipts: int
    capsule_chunk_ids: list[str]
    omitted_chunk_ids: list[str]
    attached_pictures: list[str]
    dropped_pictures: list[str]

    @classmethod
    def class_name(cls) -> str:
        """Stable name for instrumentation handlers."""
        return "CapsuleCompactedEvent"


def _announce(report: Compaction) -> None:
    _dispatcher.event(
        CapsuleCompactedEvent(
            boundary=report.boundary,
            receipts=report.receipts,
            capsule_chunk_ids=list(report.capsule.chunk_ids),
            omitted_chunk_ids=list(report.capsule.omitted),
            attached_pictures=[p.ref for p in report.attached],
            dropped_pictures=[f"{d.picture.ref}: {d.reason}" for d in report.dropped],
        )
    )


# -- nodes and messages <-> core records ----------------------------------------------------


def _evidence(node: NodeWithScore, collection: str | None) -> Evidence:
    inner = node.node
    meta = inner.metadata
    uri = meta.get("source") or meta.get("file_path") or meta.get("url")
    return Evidence(
        chunk_id=inner.node_id,
        content=inner.get_content(metadata_mode=MetadataMode.NONE),
        document_id=str(inner.ref_doc_id or meta.get("document_id") or uri or inner.node_id),
        title=meta.get("title") or meta.get("file_name"),
        uri=str(uri) if uri else None,
        collection=meta.get("collection") or collection,
        picture_refs=tuple(meta.get("picture_refs") or ()),
    )


def _part(block: ContentBlock) -> Part:
    if isinstance(block, TextBlock):
        return TextPart(text=block.text)
    if isinstance(block, ImageBlock):
        data = block.image if isinstance(block.image, bytes) else None
        return ImagePart(
            base64=data.decode("ascii", "replace") if data else None,
            url=str(block.url) if block.url else None,
            mime_type=block.image_mimetype,
        )
    return OtherPart(kind=block.block_type)


def _tool_calls(message: ChatMessage) -> tuple[ToolCall, ...]:
    calls = [
        ToolCall(
            id=b.tool_call_id or "",
            name=b.tool_name,
            args=b.tool_kwargs if isinstance(b.tool_kwargs, dict) else {},
        )
        for b in message.blocks
        if isinstance(b, ToolCallBlock)
    ]
    for raw in message.additional_kwargs.get("tool_calls") or ():
        data = raw if isinstance(raw, Mapping) else getattr(raw, "__dict__", {})
        function = data.get("function")
        name = data.get("name") or getattr(function, "name", None)
        if isinstance(function, Mapping):
            name = function.get("name", name)
        if name:
            calls.append(ToolCall(id=str(data.get("id") or ""), name=str(name)))
    return tuple(calls)


def _citations(message: ChatMessage) -> tuple[CitationRef, ...]:
    return tuple(
        CitationRef(
            cited_text=b.cited_content.text if isinstance(b.cited_content, TextBlock) else None,
            url=b.source,
            title=b.title,
        )
        for b in message.blocks
        if isinstance(b, CitationBlock)
    )


def _to_core(message: ChatMessage, key: int) -> Message:
    kwargs = message.additional_kwargs
    return Message(
        role=_ROLES.get(MessageRole(message.role), "user"),
        parts=tuple(_part(b) for b in message.blocks),
        tool_calls=_tool_calls(message),
        tool_call_id=kwargs.get("tool_call_id"),
        tool_name=kwargs.get("name") or kwargs.get("tool_name"),
        citations=_citations(message),
        key=str(key),
    )


def _block(part: Part) -> ContentBlock:
    if isinstance(part, TextPart):
        return TextBlock(text=part.text)
    if isinstance(part, ImagePart):
        return ImageBlock(
            image=part.base64.encode("ascii") if part.base64 else None,
            url=part.url,
            image_mimetype=part.mime_type,
        )
    raise ValueError(f"compaction produced an uninterpretable part: {part!r}")


def _back(
    result: Iterable[Message], originals: Sequence[ChatMessage], converted: Sequence[Message]
) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for message in result:
        if message.key is None:
            blocks = [_block(p) for p in message.parts]
            out.append(ChatMessage(role=MessageRole.USER, blocks=blocks))
            continue
        index = int(message.key)
        if message is converted[index]:
            out.append(originals[index])
        else:
            blocks = [_block(p) for p in message.parts]
            out.append(originals[index].model_copy(update={"blocks": blocks}))
    return out


# -- agent memory -----------------------------------------------------------------------------


class CapsuleMemory(BaseMemory):
    """Agent memory whose `get` shows earlier evidence only as a capsule of what was cited.

    Wraps any `BaseMemory` (a `Memory` by default). Writes go to the inner memory
    unchanged, so `get_all` and the chat store keep the real history; `get` and
    `aget` return the whole stored history compacted (`capsa.capsule.compact`).
    A user message put into the memory begins a question whose identity is the
    number of messages stored before it; the agent's final `aput_messages` ends it
    and records the answer's ``[chunk_id]`` markers and `CitationBlock` citations.
    Retrievals and cite calls are recorded by the tools this memory makes:
    `retriever_tool` and `cite_tool`.

    The inner memory's token limit and memory blocks do not shape `get`: the view
    is built from `get_all`, since positions in the full history are question
    identities. `ReActAgent` histories are recorded but not compacted: ReAct keeps
    tool observations inside the assistant's reasoning text, not as tool messages,
    and capsa does not cut evidence out of prose.

    Setup:
        ``pip install 'capsa[llama-index]'``

    Usage:
        .. code-block:: python

            memory = CapsuleMemory.from_defaults(session_id="user-1")
            agent = FunctionAgent(
                tools=[memory.retriever_tool(index.as_retriever()), memory.cite_tool()],
                llm=llm,
            )
            await agent.run("What is the hotel cap?", memory=memory)
            saved = memory.ledger.to_json()  # persist beside the chat store
    """

    memory: BaseMemory
    """The memory that stores the real history."""
    ledger: EvidenceLedger = Field(default_factory=EvidenceLedger)
    """What each question retrieved and cited; persist it with ``to_json()``."""
    evidence_tools: frozenset[str] = frozenset()
    """Names of the evidence tools; `retriever_tool` adds its tool's name."""
    fetch_picture: PictureFetcher | None = Field(default=None, exclude=True)
    """Fetches cited pictures' bytes for re-attachment; without it none are attached."""
    max_capsule_tokens: int | None = Field(default=None, gt=0)
    """Optional hard bound on the capsule (oldest groups drop first)."""

    @classmethod
    def class_name(cls) -> str:
        """Stable name for serialisation."""
        return "CapsuleMemory"

    @classmethod
    def from_defaults(
        cls,
        memory: BaseMemory | None = None,
        *,
        ledger: EvidenceLedger | None = None,
        **memory_kwargs: Any,
    ) -> CapsuleMemory:
        """Wrap `memory`, or a `Memory.from_defaults(**memory_kwargs)`, with a carried ledger."""
        inner = memory if memory is not None else Memory.from_defaults(**memory_kwargs)
        return cls(memory=inner, ledger=ledger or EvidenceLedger())

    # -- reads --------------------------------------------------------------------------------

    def _view(self, history: list[ChatMessage]) -> list[ChatMessage]:
        converted = [_to_core(m, i) for i, m in enumerate(history)]
        report = compact_with_report(
            converted,
            self.ledger,
            owned_tools=self.evidence_tools,
            fetch_picture=self.fetch_picture,
            max_tokens=self.max_capsule_tokens,
        )
        _announce(report)
        return _back(report.messages, history, converted)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The stored history, with earlier evidence compacted.

        Raises:
            capsa.errors.CompactionRefused: evidence is stored that the ledger does not cover.
        """
        return self._view(self.memory.get_all())

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Async twin of `get`."""
        return self._view(await self.memory.aget_all())

    def get_all(self) -> list[ChatMessage]:
        """The stored history, intact."""
        return self.memory.get_all()

    async def aget_all(self) -> list[ChatMessage]:
        """Async twin of `get_all`."""
        return await self.memory.aget_all()

    # -- writes -------------------------------------------------------------------------------

    def _arrived(self, message: ChatMessage, stored: int) -> None:
        if message.role == MessageRole.USER:
            if self.ledger.in_progress:
                self.ledger = self.ledger.end_question(stored)
            self.ledger = self.ledger.begin_question(stored)

    def _answered(self, history: list[ChatMessage]) -> None:
        if self.ledger.question is None:
            return
        converted = [_to_core(m, i) for i, m in enumerate(history)]
        ledger = record_messages(self.ledger, converted, owned_tools=self.evidence_tools)
        self.ledger = ledger.end_question(len(history)) if ledger.in_progress else ledger

    def put(self, message: ChatMessage) -> None:
        """Store a message; a user message begins a question."""
        self._arrived(message, len(self.memory.get_all()))
        self.memory.put(message)

    async def aput(self, message: ChatMessage) -> None:
        """Async twin of `put`."""
        self._arrived(message, len(await self.memory.aget_all()))
        await self.memory.aput(message)

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store a finished step's messages (the agent's scratchpad) and end the question."""
        self.memory.put_messages(messages)
        self._answered(self.memory.get_all())

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async twin of `put_messages`."""
        await self.memory.aput_messages(messages)
        self._answered(await self.memory.aget_all())

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history; the ledger starts afresh, covering nothing stored before."""
        self.memory.set(messages)
        self.ledger = EvidenceLedger()

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async twin of `set`."""
        await self.memory.aset(messages)
        self.ledger = EvidenceLedger()

    def reset(self) -> None:
        """Clear the history and the ledger."""
        self.memory.reset()
        self.ledger = EvidenceLedger()

    async def areset(self) -> None:
        """Async twin of `reset`."""
        await self.memory.areset()
        self.ledger = EvidenceLedger()

    # -- tools --------------------------------------------------------------------------------

    def _retrieved(self, nodes: Sequence[NodeWithScore], tool: str, collection: str | None) -> str:
        evidence = [_evidence(n, collection) for n in nodes]
        self.ledger = self.ledger.record_retrieval(evidence, tool=tool)
        return render_evidence(evidence)

    def retriever_tool(
        self,
        retriever: BaseRetriever,
        *,
        name: str = "search_knowledge_base",
        description: str = _RETRIEVER_DESCRIPTION,
        collection: str | None = None,
    ) -> FunctionTool:
        """An evidence tool over `retriever` that records what it returns in this memory's ledger.

        Its output shows each node as ``[node_id] Source: ...`` and its text, so the
        model can cite node ids. Registers `name` as an evidence tool.
        """
        self.evidence_tools = self.evidence_tools | {name}

        def search(query: str) -> str:
            return self._retrieved(retriever.retrieve(query), name, collection)

        async def asearch(query: str) -> str:
            return self._retrieved(await retriever.aretrieve(query), name, collection)

        return FunctionTool.from_defaults(
            fn=search, async_fn=asearch, name=name, description=description
        )

    def cite_tool(
        self, *, name: str = "cite", description: str = _CITE_DESCRIPTION
    ) -> FunctionTool:
        """The tool the model calls to declare which chunks its answer relies on.

        Ids are checked with `capsa.capsule.cite_ids` against this question's
        retrieval and the capsule; damaged ids are repaired, unrelated ones ignored.
        """

        def cite(chunk_ids: list[str]) -> str:
            result = cite_ids(chunk_ids, self.ledger.citable_ids())
            if result.accepted:
                self.ledger = self.ledger.record_citations(result.accepted)
            return result.acknowledgement()

        return FunctionTool.from_defaults(fn=cite, name=name, description=description)


# -- chat-engine memory block -------------------------------------------------------------------


class CitationCapsuleBlock(BaseMemoryBlock[str]):
    """A `Memory` block that re-injects the evidence earlier chat-engine answers cited.

    Chat engines put retrieved nodes into one turn's prompt and store only the
    text of the exchange, so a follow-up loses what the previous answer rested on.
    After each turn, hand the engine's response to `record`: its source nodes are
    recorded as that exchange's retrieval and its citations (``[node_id]`` markers
    in the answer, or the ids you pass) as what it cited. `Memory` then inserts the
    capsule of everything cited so far wherever it inserts its blocks.

    Each recorded exchange counts as two messages (the user's and the assistant's),
    the shape chat engines store, which is what the ledger's identities count.

    Usage:
        .. code-block:: python

            block = CitationCapsuleBlock()
            memory = Memory.from_defaults(session_id="s", memory_blocks=[block])
            engine = ContextChatEngine.from_defaults(retriever=retriever, memory=memory, llm=llm)
            response = engine.chat("What is the hotel cap?")
            block.record(response)
    """

    name: str = "cited_evidence"
    description: str | None = "Evidence that earlier answers in this conversation cited."
    priority: int = 1
    accept_short_term_memory: bool = False
    ledger: EvidenceLedger = Field(default_factory=EvidenceLedger)
    """What each exchange retrieved and cited; persist it with ``to_json()``."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Optional hard bound on the capsule (oldest groups drop first)."""
    tool_name: str = "chat_engine_retrieval"
    """Name recorded as the retrieving tool."""

    def record(
        self,
        response: Any,
        *,
        cited: Iterable[str] | None = None,
        collection: str | None = None,
    ) -> None:
        """Record one finished exchange from a chat engine's response.

        Args:
            response: An `AgentChatResponse` (or anything with ``source_nodes`` and
                ``response``).
            cited: Node ids the answer rests on; by default read from ``[node_id]``
                markers in the answer, accepted only for nodes it was shown.
            collection: Collection to name on nodes whose metadata names none.
        """
        nodes: Sequence[NodeWithScore] = getattr(response, "source_nodes", None) or ()
        boundary = self.ledger.ended_at or 0
        ledger = self.ledger.begin_question(boundary)
        evidence = [_evidence(n, collection) for n in nodes]
        ledger = ledger.record_retrieval(evidence, tool=self.tool_name)
        visible = ledger.citable_ids()
        if cited is None:
            wanted = parse_citations(str(getattr(response, "response", "") or ""), visible)
        else:
            wanted = cite_ids(cited, visible).accepted
        self.ledger = ledger.record_citations(wanted).end_question(boundary + 2)

    def _capsule_text(self, max_tokens: int | None) -> str:
        return build_capsule(self.ledger, max_tokens).text

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        return self._capsule_text(self.max_tokens)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Nothing to take from flushed messages: exchanges arrive through `record`."""

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the oldest cited groups until about `tokens_to_truncate` tokens are freed."""
        current = build_capsule(self.ledger).tokens
        target = current - tokens_to_truncate
        if target <= 0:
            return None
        bound = target if self.max_tokens is None else min(target, self.max_tokens)
        return self._capsule_text(bound)
