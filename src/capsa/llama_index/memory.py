"""`CapsuleMemory`: LlamaIndex agent memory whose reads show only what answers cited.

Agents (`FunctionAgent`, `ReActAgent`) store every tool result in memory and read
all of it back on every step, so old retrievals pile up. `CapsuleMemory` wraps a
memory and returns the compacted view from `get`/`aget`: once a question ends,
its evidence returns show the chunks its answer cited, whole, and a receipt
naming the rest, in a wire form that never changes again (prompt-cache friendly).
Its cite calls and their acknowledgements leave the view when it ends (what it
cited is what its returns show whole). `get_all` and the store keep the real
history. The tools in
`capsa.llama_index.capsule_tools` record retrievals, citations and recalls in the
memory of the run that calls them.

`CitationCapsuleBlock`, for chat engines, lives in `capsa.llama_index.capsule_block`
and is re-exported here. Conversion lives in `capsa.llama_index.capsule_conversion`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import CacheControl, CachePoint, ChatMessage, MessageRole
from llama_index.core.memory import BaseMemory, Memory
from llama_index.core.tools import FunctionTool
from pydantic import Field, PrivateAttr

from capsa.capsule import (
    CiteResult,
    Evidence,
    EvidenceLedger,
    RecallResult,
    TokenCounter,
    as_tokenizer,
    cite_ids,
    estimate_tokens,
    pictures_needed,
    prune_carried,
    recall,
    record_messages,
    stable_end,
    view_cut,
    view_notice,
)
from capsa.capsule.compaction import LOW_WATER
from capsa.capsule.render import CITE_DESCRIPTION, RECALL_DESCRIPTION, SEARCH_DESCRIPTION
from capsa.capsule.session import AnyPictureFetcher, PictureCache
from capsa.llama_index.capsule_block import CitationCapsuleBlock
from capsa.llama_index.capsule_conversion import (
    CapsuleCompactedEvent,
    compact,
    convert,
    keys,
    with_whole_evidence,
    without_whole_evidence,
)
from capsa.llama_index.capsule_tools import (
    capsule_cite_tool,
    capsule_recall_tool,
    capsule_retriever_tool,
)

__all__ = [
    "CapsuleCompactedEvent",
    "CapsuleMemory",
    "CitationCapsuleBlock",
    "capsule_cite_tool",
    "capsule_recall_tool",
    "capsule_retriever_tool",
]


class CapsuleMemory(BaseMemory):
    """Agent memory whose `get` shows earlier evidence only as what the answers cited.

    Wraps any `BaseMemory` (a `Memory` by default). Writes go to the inner memory
    unchanged, so `get_all` and the chat store keep the real history; `get` and
    `aget` return the whole stored history compacted (`capsa.capsule.compact`).
    A user message put into the memory begins a question whose identity is the
    number of messages stored before it; the agent's final `aput_messages` ends it
    and records the answer's ``[chunk_id]`` markers and `CitationBlock` citations.
    Retrievals, citations and recalls are recorded by the capsule tools, which act
    on the memory of the run that calls them: one agent serves many sessions.

    The view is built from `get_all`, since positions in the full history are
    question identities, and honours the inner memory's token limit
    (`view_token_limit`): over it, the oldest questions leave the view in steps
    (down to 60 % of the limit), so the cached prefix moves rarely; a notice says
    so and their chunks stay recallable. Memory blocks do not shape `get`.
    `ReActAgent` histories are recorded but not compacted: ReAct keeps
    tool observations inside the assistant's reasoning text, not as tool messages,
    and capsa does not cut evidence out of prose.

    Setup:
        ``pip install 'capsa[llama-index]'``

    Usage:
        .. code-block:: python

            agent = FunctionAgent(
                tools=[capsule_retriever_tool(index.as_retriever()), capsule_cite_tool(),
                       capsule_recall_tool()],
                llm=llm,
            )
            memory = CapsuleMemory.from_defaults(session_id="user-1")
            await agent.run("What is the hotel cap?", memory=memory)
            saved = memory.ledger.to_json()  # persist beside the chat store
    """

    memory: BaseMemory
    """The memory that stores the real history."""
    ledger: EvidenceLedger = Field(default_factory=EvidenceLedger)
    """What each question retrieved and cited, and the evidence tools' names; persist
    it with ``to_json()``."""
    evidence_tools: frozenset[str] = frozenset()
    """Names of evidence tools besides those the ledger already remembers."""
    recall_tool_name: str = "recall"
    """Name of the recall tool, whose returns are evidence too."""
    cite_tool_name: str = "cite"
    """Name of the cite tool, whose calls leave the view once their question ended."""
    keep_cite_calls: bool = False
    """Keep ended questions' cite calls and acknowledgements in the view, as stored.
    Off by default: they repeat what the returns already show, on every later read.
    Turn it on for a model that stops calling the cite tool when its history shows no
    earlier cite calls to follow."""
    fetch_picture: AnyPictureFetcher | None = Field(default=None, exclude=True)
    """Fetches cited pictures' bytes (sync, or async for `aget`); without it none are
    attached. Each picture is fetched once per question."""
    max_capsule_tokens: int | None = Field(default=None, gt=0)
    """Optional hard bound on everything compaction writes into the view."""
    tokenizer: TokenCounter = Field(default=estimate_tokens, exclude=True)
    """Counts tokens for `max_capsule_tokens`: a counter or an encoder (tiktoken's
    ``encode``)."""
    cache_breakpoint: bool = False
    """End the previous question's user message with a `CachePoint` in every view.

    When a question ends its returns are rewritten, so what a later request shares
    with the provider's cache ends at that question's user message. Anthropic
    looks for a cached prefix only about 20 content blocks before a breakpoint:
    after a question of ten or more tool rounds, a breakpoint at the end of the
    request no longer reaches it and the history is written again at the write
    price. This breakpoint is read instead (see the capsule docs for the bill).
    Off by default: for Anthropic models only, which allow four breakpoints."""
    low_water: float = Field(default=LOW_WATER, gt=0, le=1)
    """Over a bound (`max_capsule_tokens` or the inner memory's token limit), the
    fraction of it a step degrades or drops down to. Lower moves the cached prefix
    less often; 1.0 frees just enough, moving it almost every question."""
    _pictures: PictureCache | None = PrivateAttr(default=None)
    _whole: dict[str, tuple[Evidence, ...]] = PrivateAttr(default_factory=dict)
    """Budgeted returns of the current run by text, with their chunks whole, until stored."""

    @classmethod
    def class_name(cls) -> str:
        """Stable name for serialisation."""
        return "CapsuleMemory"

    @classmethod
    def from_defaults(
        cls, memory: BaseMemory | None = None, **options: Any
    ) -> CapsuleMemory:
        """Wrap `memory`, or a fresh `Memory.from_defaults(...)`, taking the constructor's options.

        Every field of `CapsuleMemory` (`ledger`, `fetch_picture`, `max_capsule_tokens`,
        `keep_cite_calls`, `cache_breakpoint`, ...) is accepted, with or without an
        inner memory. Without one, `Memory.from_defaults`'s own options
        (`session_id`, `token_limit`, `chat_store`, ...) build it; given one, they
        are refused, since that memory is already built.

        Raises:
            TypeError: naming an option that is neither a `CapsuleMemory` field nor,
                without an inner memory, a `Memory.from_defaults` option.
        """
        fields = set(cls.model_fields) - {"memory"}
        inner_names = _memory_options()
        mine = {k: v for k, v in options.items() if k in fields}
        rest = {k: v for k, v in options.items() if k not in fields}
        unknown = sorted(k for k in rest if k not in inner_names)
        if unknown:
            raise TypeError(
                f"CapsuleMemory.from_defaults got an unexpected option {unknown[0]!r}"
            )
        if memory is not None and rest:
            raise TypeError(
                f"CapsuleMemory.from_defaults got the Memory option {sorted(rest)[0]!r} "
                "beside an inner memory; set it on that memory instead"
            )
        if mine.get("ledger") is None:
            mine.pop("ledger", None)
        inner = memory if memory is not None else Memory.from_defaults(**rest)
        return cls(memory=inner, **mine)

    @property
    def owned_tools(self) -> frozenset[str]:
        """Every tool whose returns are evidence: declared, remembered, and recall."""
        return self.evidence_tools | set(self.ledger.evidence_tools) | {self.recall_tool_name}

    # -- reads --------------------------------------------------------------------------------

    def _cache(self) -> PictureCache | None:
        if self.fetch_picture is not None and self._pictures is None:
            self._pictures = PictureCache(self.fetch_picture)
        return self._pictures

    def _located(self, history: Sequence[ChatMessage]) -> EvidenceLedger:
        self.ledger = self.ledger.locate(keys(history))
        return self.ledger

    def _view(self, history: list[ChatMessage]) -> list[ChatMessage]:
        ledger = self._located(history)
        cache = self._cache()
        view = compact(
            history,
            ledger,
            evidence_tools=self.owned_tools,
            fetch_picture=cache.lookup(ledger.question) if cache else None,
            max_tokens=self.max_capsule_tokens,
            tokenizer=self.tokenizer,
            cite_tools=() if self.keep_cite_calls else (self.cite_tool_name,),
            low_water=self.low_water,
        )
        view = self._bounded(without_whole_evidence(view))
        return with_cache_point(view) if self.cache_breakpoint else view

    def view_token_limit(self) -> int | None:
        """The inner memory's bound on its chat history, which the view honours too.

        A `Memory` keeps ``token_limit * chat_history_token_ratio`` tokens of chat
        history; a memory with only a ``token_limit`` keeps that; others set none.
        """
        limit = getattr(self.memory, "token_limit", None)
        if not isinstance(limit, int) or limit < 1:
            return None
        ratio = getattr(self.memory, "chat_history_token_ratio", 1.0)
        return max(1, int(limit * ratio)) if isinstance(ratio, float | int) else limit

    def _bounded(self, view: list[ChatMessage]) -> list[ChatMessage]:
        """`view` within `view_token_limit`, oldest questions dropped in steps.

        Questions leave the view in steps (`capsa.capsule.groups_to_drop`), so the
        prefix a provider caches moves at most once per several questions; a
        notice says how many left, and their chunks stay recallable by id.
        """
        limit = self.view_token_limit()
        if limit is None:
            return view
        count = as_tokenizer(self.tokenizer)
        roles = [m.role.value for m in view]
        tokens = [count(_text_of(m)) for m in view]
        notice = count(view_notice(sum(r == "user" for r in roles)))
        cut = view_cut(roles, tokens, limit, notice_tokens=notice, low_water=self.low_water)
        if cut.dropped == 0:
            return view
        first = roles.index("user")
        message = ChatMessage(role=MessageRole.SYSTEM, content=view_notice(cut.dropped))
        return [*view[:first], message, *view[cut.start:]]

    def _wanted(self, history: list[ChatMessage]) -> Any:
        converted = convert(history, self.owned_tools)
        return pictures_needed(converted, self.ledger, owned_tools=self.owned_tools)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The stored history, with earlier evidence compacted."""
        history = self.memory.get_all()
        cache = self._cache()
        if cache is not None:
            self._located(history)
            cache.fetch_all(self._wanted(history), self.ledger.question)
        return self._view(history)

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Async twin of `get`; an async picture fetcher is awaited here.

        Compaction runs in a worker thread, so a long conversation never stalls
        the event loop.
        """
        history = await self.memory.aget_all()
        cache = self._cache()
        if cache is not None:
            self._located(history)
            wanted = await asyncio.to_thread(self._wanted, history)
            await cache.afetch_all(wanted, self.ledger.question)
        return await asyncio.to_thread(self._view, history)

    def get_all(self) -> list[ChatMessage]:
        """The stored history, intact."""
        return self.memory.get_all()

    async def aget_all(self) -> list[ChatMessage]:
        """Async twin of `get_all`."""
        return await self.memory.aget_all()

    # -- writes -------------------------------------------------------------------------------

    def _arrived(self, message: ChatMessage, stored: int) -> None:
        if message.role != MessageRole.USER:
            return
        self.ledger = self.ledger.locate([None] * stored)
        if self.ledger.in_progress:
            self.ledger = self.ledger.end_question(stored)
        if self.ledger.question is not None and stored <= self.ledger.question:
            self.ledger = self.ledger.reanchor(stored).model_copy(update={"in_progress": False})
        self.ledger = self.ledger.begin_question(stored)

    def _answered(self, history: list[ChatMessage]) -> None:
        if self.ledger.question is None:
            return
        converted = convert(history, self.owned_tools)
        ledger = record_messages(self.ledger, converted, owned_tools=self.owned_tools)
        if ledger.in_progress:
            ledger = ledger.end_question(len(history))
        self.ledger = prune_carried(ledger, converted, owned_tools=self.owned_tools)

    def keep_whole(self, text: str, chunks: Sequence[Evidence]) -> None:
        """Remember a budgeted return's chunks whole until the return is stored.

        An agent stores only a tool's text; when a tool message with exactly this
        text is put into the memory, it is stored (as a copy) with `chunks` in
        ``additional_kwargs`` (`WHOLE_EVIDENCE_KEY`), so compaction shows cited
        chunks whole once the question ends and `recall` finds every chunk later.
        Views never carry that key.
        """
        self._whole[text] = tuple(chunks)

    def _with_whole(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        out: list[ChatMessage] = []
        for message in messages:
            chunks = (
                self._whole.pop(_text_of(message), None)
                if message.role == MessageRole.TOOL and self._whole
                else None
            )
            out.append(message if chunks is None else with_whole_evidence(message, chunks))
        return out

    def put(self, message: ChatMessage) -> None:
        """Store a message; a user message begins a question."""
        self._arrived(message, len(self.memory.get_all()))
        self.memory.put(self._with_whole([message])[0])

    async def aput(self, message: ChatMessage) -> None:
        """Async twin of `put`."""
        self._arrived(message, len(await self.memory.aget_all()))
        await self.memory.aput(self._with_whole([message])[0])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store a finished step's messages (the agent's scratchpad) and end the question."""
        self.memory.put_messages(self._with_whole(messages))
        self._answered(self.memory.get_all())

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async twin of `put_messages`."""
        await self.memory.aput_messages(self._with_whole(messages))
        await asyncio.to_thread(self._answered, await self.memory.aget_all())

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history; the ledger is kept, re-anchored if the history got shorter."""
        self.memory.set(messages)
        self._located(messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async twin of `set`."""
        await self.memory.aset(messages)
        self._located(messages)

    def reset(self) -> None:
        """Clear the history and the ledger: nothing crosses into the next conversation."""
        self.memory.reset()
        self.ledger = EvidenceLedger(evidence_tools=self.ledger.evidence_tools)
        self._whole.clear()
        self._pictures = None  # the next conversation numbers its questions from 0 again

    async def areset(self) -> None:
        """Async twin of `reset`."""
        await self.memory.areset()
        self.ledger = EvidenceLedger(evidence_tools=self.ledger.evidence_tools)
        self._whole.clear()
        self._pictures = None

    # -- what the tools do --------------------------------------------------------------------

    def record_retrieval(self, found: Sequence[Evidence], *, tool: str) -> None:
        """Record chunks an evidence tool returned for the current question."""
        ledger = self.ledger.with_evidence_tools([tool])
        if ledger.question is None or not ledger.in_progress:
            ledger = ledger.begin_question(max(len(self.memory.get_all()), ledger.ended_at or 0))
        self.ledger = ledger.record_retrieval(found, tool=tool)

    def cite(self, chunk_ids: Iterable[str]) -> CiteResult:
        """Check ids against what the model could see and record the accepted ones."""
        result = cite_ids(chunk_ids, self.ledger.citable_ids())
        if result.accepted:
            self.ledger = self.ledger.record_citations(result.accepted)
        return result

    async def arecall(self, chunk_ids: Iterable[str], *, tool: str | None = None) -> RecallResult:
        """Find chunks in the stored history and make them citable for this question."""
        name = tool or self.recall_tool_name
        history = await self.memory.aget_all()
        self._located(history)  # the history may have been shortened since the last read
        owned = self.owned_tools | {name}
        result = recall(chunk_ids, convert(history, owned), self.ledger, owned_tools=owned)
        if result.evidence:
            self.record_retrieval(result.evidence, tool=name)
        return result

    # -- tools bound to this memory -----------------------------------------------------------

    def retriever_tool(
        self,
        retriever: BaseRetriever,
        *,
        name: str = "search_knowledge_base",
        description: str = SEARCH_DESCRIPTION,
        collection: str | None = None,
        budget: int | None = None,
    ) -> FunctionTool:
        """`capsule_retriever_tool` falling back to this memory; registers `name`.

        With `budget`, returns are budgeted packets counted by this memory's
        `tokenizer`, every chunk kept whole beside the stored return (recallable).
        """
        self.ledger = self.ledger.with_evidence_tools([name])
        return capsule_retriever_tool(
            retriever,
            name=name,
            description=description,
            collection=collection,
            memory=self,
            budget=budget,
            tokenizer=self.tokenizer,
        )

    def cite_tool(
        self, *, name: str | None = None, description: str = CITE_DESCRIPTION
    ) -> FunctionTool:
        """`capsule_cite_tool` falling back to this memory, named `cite_tool_name` unless
        `name` says otherwise (set `cite_tool_name` instead, so the view knows the name)."""
        chosen = name or self.cite_tool_name
        return capsule_cite_tool(name=chosen, description=description, memory=self)

    def recall_tool(self, *, description: str = RECALL_DESCRIPTION) -> FunctionTool:
        """`capsule_recall_tool` (named `recall_tool_name`) falling back to this memory."""
        return capsule_recall_tool(name=self.recall_tool_name, description=description, memory=self)


def _text_of(message: ChatMessage) -> str:
    """Every text block of a message; other blocks count as nothing."""
    return "".join(getattr(block, "text", "") or "" for block in message.blocks)


def _memory_options() -> frozenset[str]:
    """The keyword options `Memory.from_defaults` takes."""
    return frozenset(inspect.signature(Memory.from_defaults).parameters) - {"cls"}


def with_cache_point(messages: list[ChatMessage]) -> list[ChatMessage]:
    """`messages` with the previous question's user message ended by a `CachePoint`.

    That message ends the prefix a later request keeps (`capsa.capsule.stable_end`).
    On a copy: the caller's messages are not changed. Nothing is marked before
    the second question, when nothing has been rewritten yet.

    Examples:
        >>> marked = with_cache_point([ChatMessage(role="user", content="q1"),
        ...                            ChatMessage(role="assistant", content="a1"),
        ...                            ChatMessage(role="user", content="q2")])
        >>> [type(block).__name__ for block in marked[0].blocks]
        ['TextBlock', 'CachePoint']
    """
    end = stable_end([message.role.value for message in messages])
    if end is None or not messages[end].blocks:
        return messages
    target = messages[end]
    point = CachePoint(cache_control=CacheControl(type="ephemeral"))
    marked = list(messages)
    marked[end] = target.model_copy(update={"blocks": [*target.blocks, point]})
    return marked
