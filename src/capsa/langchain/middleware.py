"""Citation capsules for LangChain: agent middleware, a context edit, an LCEL step, tools.

LangChain agents checkpoint every retriever `ToolMessage`, so each question drags
all earlier retrievals along until the thread overflows the window. Here the model
sees earlier evidence only as one capsule of what the answers cited, while the
checkpointed state keeps the real history.

- `CitationCapsuleMiddleware` (for `langchain.agents.create_agent`): rewrites the
  messages of every model call through `wrap_model_call` / `awrap_model_call` and
  keeps the `EvidenceLedger` in the agent's state, so whatever checkpointer the
  agent runs persists it.
- `capsa_retriever_tool`: wraps a retriever as an evidence tool whose output shows
  chunk ids and whose artifact carries the documents the middleware records.
- `cite_tool`: the tool the model calls to declare what its answer rests on.
- `CitationCapsuleEdit`: the same rewrite for `ContextEditingMiddleware(edits=[...])`.
- `capsule_messages`: the same rewrite as a function or `RunnableLambda` for chains.

Every class here converts LangChain messages to `capsa.capsule.Message`, calls the
core, and converts back; the logic lives in `capsa.capsule`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, cast, overload

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ModelResponse
    from langchain.tools import ToolRuntime
    from langgraph.runtime import Runtime
except ImportError as exc:  # langchain-core alone does not ship the agents package
    raise ImportError(
        "capsa.langchain.middleware needs the 'langchain' extra: pip install 'capsa[langchain]'"
    ) from exc

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
    TextPart,
    ToolCall,
    cite_ids,
    compact_with_report,
    record_messages,
    render_evidence,
)

__all__ = [
    "LEDGER_KEY",
    "CapsuleState",
    "CitationCapsuleEdit",
    "CitationCapsuleMiddleware",
    "capsa_retriever_tool",
    "capsule_messages",
    "cite_tool",
]

LEDGER_KEY = "capsa_ledger"
"""Agent-state key holding the ledger's JSON."""

EVENT = "capsa.capsule"
"""Name of the custom callback event reporting each compaction."""

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}

_RETRIEVER_DESCRIPTION = (
    "Search the knowledge base. Each result starts with its [chunk_id] and source. "
    "After answering from the results, call the cite tool with the chunk ids your "
    "answer relies on."
)
_CITE_DESCRIPTION = (
    "Record which retrieved chunks your answer relies on. Pass their chunk ids exactly as "
    "shown in search results or in the evidence capsule. Call it once per answer."
)


class CapsuleState(AgentState[Any]):
    """Agent state with the evidence ledger beside the messages."""

    capsa_ledger: NotRequired[str]
    """The `EvidenceLedger` as JSON; written by `CitationCapsuleMiddleware`."""


@functools.lru_cache(maxsize=16)
def _parse(text: str) -> EvidenceLedger:
    # A model call reads the same JSON several times (before_model, the model call, the
    # cite tool); ledgers are frozen, so sharing one parsed copy is safe.
    return EvidenceLedger.from_json(text)


def _load(state: Mapping[str, Any]) -> EvidenceLedger | None:
    stored = state.get(LEDGER_KEY)
    return _parse(stored) if stored else None


# -- documents <-> evidence ------------------------------------------------------------------


def _chunk_id(doc: Document) -> str:
    meta = doc.metadata
    for candidate in (meta.get("capsa_chunk_id"), doc.id, meta.get("chunk_id")):
        if candidate:
            return str(candidate)
    source = str(meta.get("source", ""))
    return hashlib.sha256(f"{source}\n{doc.page_content}".encode()).hexdigest()[:16]


def _stamp(doc: Document, collection: str | None) -> Document:
    chunk_id = _chunk_id(doc)
    meta = dict(doc.metadata)
    meta["capsa_chunk_id"] = chunk_id
    meta.setdefault(
        "capsa_document_id", str(meta.get("document_id") or meta.get("source") or chunk_id)
    )
    if collection is not None:
        meta.setdefault("collection", collection)
    return Document(page_content=doc.page_content, metadata=meta, id=chunk_id)


def _evidence(item: Any) -> Evidence | None:
    if isinstance(item, Evidence):
        return item
    if isinstance(item, Mapping) and "chunk_id" in item:
        return Evidence.model_validate(item)
    if not isinstance(item, Document):
        return None
    meta = item.metadata
    chunk_id = _chunk_id(item)
    uri = meta.get("source") or meta.get("uri") or meta.get("url")
    return Evidence(
        chunk_id=chunk_id,
        content=item.page_content,
        document_id=str(
            meta.get("capsa_document_id") or meta.get("document_id") or uri or chunk_id
        ),
        title=meta.get("title"),
        uri=str(uri) if uri else None,
        collection=meta.get("collection"),
        picture_refs=tuple(meta.get("picture_refs") or ()),
    )


def _artifact_evidence(artifact: Any) -> tuple[Evidence, ...] | None:
    if not isinstance(artifact, Sequence) or isinstance(artifact, str | bytes):
        return None
    found = [e for e in (_evidence(item) for item in artifact) if e is not None]
    return tuple(found)


# -- messages <-> core records -----------------------------------------------------------------


def _part(block: Any) -> Part:
    if isinstance(block, str):
        return TextPart(text=block)
    if not isinstance(block, Mapping):
        return OtherPart(kind=type(block).__name__)
    kind = str(block.get("type", ""))
    if kind == "text":
        return TextPart(text=str(block.get("text", "")))
    if kind == "image_url":
        url = block.get("image_url")
        return ImagePart(url=url.get("url") if isinstance(url, Mapping) else url)
    if kind == "image":
        return ImagePart(
            base64=block.get("base64") or block.get("data"),
            url=block.get("url"),
            mime_type=block.get("mime_type"),
        )
    return OtherPart(kind=kind or "unknown")


def _parts(content: str | list[Any]) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),) if content else ()
    return tuple(_part(block) for block in content)


def _annotations(message: AIMessage) -> tuple[CitationRef, ...]:
    if isinstance(message.content, str):
        return ()
    refs: list[CitationRef] = []
    for block in message.content_blocks:
        data: Mapping[str, Any] = block
        notes: list[Mapping[str, Any]] = data.get("annotations") or []
        for note in notes if data.get("type") == "text" else []:
            if note.get("type") != "citation":
                continue
            extras = note.get("extras") or {}
            refs.append(
                CitationRef(
                    chunk_id=extras.get("chunk_id"),
                    cited_text=note.get("cited_text"),
                    url=note.get("url"),
                    title=note.get("title"),
                )
            )
    return tuple(refs)


@dataclass(frozen=True)
class _Observe:
    """Which tools' artifacts to read while converting, for `record_messages`."""

    evidence_tools: frozenset[str]
    cite_tools: frozenset[str]
    names: Mapping[str, str]


def _to_core(message: BaseMessage, key: int, observe: _Observe | None = None) -> Message:
    role = _ROLES.get(message.type) or getattr(message, "role", "user")
    fields: dict[str, Any] = {}
    if isinstance(message, AIMessage):
        fields["tool_calls"] = tuple(
            ToolCall(id=call.get("id") or "", name=call["name"], args=call["args"])
            for call in message.tool_calls
        )
        if observe is not None:
            fields["citations"] = _annotations(message)
    elif isinstance(message, ToolMessage):
        fields["tool_call_id"] = message.tool_call_id
        fields["tool_name"] = message.name
        if observe is not None:
            name = message.name or observe.names.get(message.tool_call_id)
            if name in observe.evidence_tools:
                fields["evidence"] = _artifact_evidence(message.artifact)
            elif name in observe.cite_tools and isinstance(message.artifact, list):
                fields["citations"] = tuple(
                    CitationRef(chunk_id=str(i)) for i in message.artifact if isinstance(i, str)
                )
    if role not in ("system", "user", "assistant", "tool"):
        role = "user"
    return Message(role=role, parts=_parts(message.content), key=str(key), **fields)


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        block: dict[str, Any] = {"type": "image"}
        if part.base64 is not None:
            block["base64"] = part.base64
        if part.url is not None:
            block["url"] = part.url
        if part.mime_type is not None:
            block["mime_type"] = part.mime_type
        return block
    raise ValueError(f"compaction produced an uninterpretable part: {part!r}")


def _content(parts: Sequence[Part]) -> str | list[str | dict[Any, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [_block(p) for p in parts]


def _back(
    result: Iterable[Message], originals: Sequence[BaseMessage], converted: Sequence[Message]
) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for message in result:
        if message.key is None:
            out.append(HumanMessage(content=_content(message.parts)))
            continue
        index = int(message.key)
        original = originals[index]
        if message is converted[index]:
            out.append(original)
        else:
            out.append(original.model_copy(update={"content": _content(message.parts)}))
    return out


def _compact(
    messages: Sequence[BaseMessage],
    ledger: EvidenceLedger | None,
    *,
    evidence_tools: Iterable[str],
    fetch_picture: PictureFetcher | None,
    max_capsule_tokens: int | None,
) -> tuple[list[BaseMessage], Compaction]:
    converted = [_to_core(m, i) for i, m in enumerate(messages)]
    report = compact_with_report(
        converted,
        ledger,
        owned_tools=evidence_tools,
        fetch_picture=fetch_picture,
        max_tokens=max_capsule_tokens,
    )
    return _back(report.messages, messages, converted), report


_EARLIER = Message(role="system")
"""Stands in for messages before the current question, which `record_messages` never reads."""


def _observed(
    messages: Sequence[BaseMessage],
    start: int,
    evidence_tools: frozenset[str],
    cite_tools: frozenset[str],
) -> list[Message]:
    current = messages[start:]
    names = {
        call_id: call["name"]
        for m in current
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if (call_id := call.get("id"))
    }
    observe = _Observe(evidence_tools=evidence_tools, cite_tools=cite_tools, names=names)
    return [_EARLIER] * start + [_to_core(m, start + i, observe) for i, m in enumerate(current)]


def _event(report: Compaction) -> dict[str, Any]:
    return {
        "boundary": report.boundary,
        "carrier": report.carrier,
        "receipts": report.receipts,
        "capsule_chunk_ids": list(report.capsule.chunk_ids),
        "capsule_tokens": report.capsule.tokens,
        "omitted_chunk_ids": list(report.capsule.omitted),
        "attached_pictures": [p.ref for p in report.attached],
        "dropped_pictures": [
            {"ref": d.picture.ref, "chunk_id": d.picture.chunk_id, "reason": d.reason}
            for d in report.dropped
        ],
    }


def _announce(report: Compaction) -> None:
    # Outside any run (a bare function call) there is no parent run and nobody listens.
    with contextlib.suppress(RuntimeError):
        dispatch_custom_event(EVENT, _event(report))


async def _aannounce(report: Compaction) -> None:
    with contextlib.suppress(RuntimeError):
        await adispatch_custom_event(EVENT, _event(report))


# -- tools ----------------------------------------------------------------------------------


class _Query(BaseModel):
    query: str = Field(description="What to search the knowledge base for.")


def capsa_retriever_tool(
    retriever: Runnable[str, list[Document]],
    *,
    name: str = "search_knowledge_base",
    description: str = _RETRIEVER_DESCRIPTION,
    collection: str | None = None,
) -> BaseTool:
    """Wrap a retriever as an evidence tool the capsule middleware can record.

    The tool's text shows every chunk as ``[chunk_id] Source: ...`` followed by its
    content, so the model can cite ids; its artifact (``content_and_artifact``) is
    the list of documents, each stamped with ``capsa_chunk_id`` and
    ``capsa_document_id`` metadata and an ``id``. A document without an id gets a
    stable one derived from its source and text.

    Args:
        retriever: Any runnable from a query to documents (a `BaseRetriever`).
        name: The tool's name; list it in the middleware's `evidence_tools`.
        description: What the model is told about the tool.
        collection: Stamped as ``collection`` metadata when documents carry none.

    Returns:
        A `StructuredTool` with sync and async paths.

    Usage:
        .. code-block:: python

            search = capsa_retriever_tool(vectorstore.as_retriever(), name="search")
            agent = create_agent(model, tools=[search],
                                 middleware=[CitationCapsuleMiddleware(evidence_tools=[search])],
                                 checkpointer=checkpointer)
    """

    def _finish(docs: Sequence[Document]) -> tuple[str, list[Document]]:
        stamped = [_stamp(d, collection) for d in docs]
        evidence = [e for e in (_evidence(d) for d in stamped) if e is not None]
        return render_evidence(evidence), stamped

    def search(query: str) -> tuple[str, list[Document]]:
        return _finish(retriever.invoke(query))

    async def asearch(query: str) -> tuple[str, list[Document]]:
        return _finish(await retriever.ainvoke(query))

    return StructuredTool.from_function(
        func=search,
        coroutine=asearch,
        name=name,
        description=description,
        args_schema=_Query,
        response_format="content_and_artifact",
    )


def _cite(chunk_ids: list[str], runtime: ToolRuntime) -> tuple[str, list[str]]:
    ledger = _load(runtime.state) or EvidenceLedger()
    result = cite_ids(chunk_ids, ledger.citable_ids())
    return result.acknowledgement(), list(result.accepted)


def cite_tool(name: str = "cite", *, description: str = _CITE_DESCRIPTION) -> BaseTool:
    """The tool a model calls to declare which chunks its answer relies on.

    Ids are checked against what the model could see (this question's retrieval
    and the capsule) with `capsa.capsule.cite_ids`, which repairs ids damaged in
    copying and never attributes an unrelated one. The acknowledgement says what
    was recorded and what was ignored; the artifact is the accepted ids, which
    `CitationCapsuleMiddleware` writes into the ledger.
    `CitationCapsuleMiddleware` registers one itself unless told not to.
    """
    return StructuredTool.from_function(
        func=_cite,
        name=name,
        description=description,
        response_format="content_and_artifact",
    )


# -- middleware -----------------------------------------------------------------------------


def _tool_names(tools: Iterable[str | BaseTool]) -> frozenset[str]:
    return frozenset(t if isinstance(t, str) else t.name for t in tools)


class CitationCapsuleMiddleware(AgentMiddleware[CapsuleState, Any, Any]):
    """Show the model earlier evidence only as a capsule of what the answers cited.

    Before every model call, earlier questions' evidence returns are rewritten on
    the request alone (`handler(request.override(messages=...))`): the newest one
    carries the capsule, the others a receipt. The checkpointed messages are never
    changed. The ledger lives in the agent state under ``capsa_ledger``; a question
    begins in `before_agent` (its identity is the history's length when it
    arrived), retrievals and citations are recorded in `before_model` and
    `after_agent`, and the question ends in `after_agent`. A run that stops early
    (an error, an interrupt) leaves its question in progress, and the next run
    resumes it under the same identity.

    Put it first in `middleware=`, so no other middleware adds or removes messages
    before it reads them: positions in the history are question identities.

    Setup:
        ``pip install 'capsa[langchain]'``

    Instantiate:
        .. code-block:: python

            search = capsa_retriever_tool(retriever, name="search")
            capsule = CitationCapsuleMiddleware(evidence_tools=[search])

    Usage:
        .. code-block:: python

            agent = create_agent(model, tools=[search], middleware=[capsule],
                                 checkpointer=SqliteSaver(conn))
            agent.invoke({"messages": [("user", "Hotel cap?")]},
                         {"configurable": {"thread_id": "t1"}})

    Args:
        evidence_tools: The tools (or tool names) whose returns are evidence.
        cite_tool_name: Name of the cite tool this middleware registers; None to
            register none (citations then come from ``[chunk_id]`` markers and
            native annotations only).
        fetch_picture: Fetches a cited picture's bytes for re-attachment; without
            it no pictures are attached. Called synchronously, on every model call
            of a question that has earlier cited pictures.
        max_capsule_tokens: Optional hard bound on the capsule (oldest groups drop first).

    Raises:
        capsa.errors.CompactionRefused: from a model call, when the thread holds
            evidence the ledger does not cover (the state lost it, or the stored
            history was shortened).
    """

    state_schema = CapsuleState

    def __init__(
        self,
        *,
        evidence_tools: Iterable[str | BaseTool],
        cite_tool_name: str | None = "cite",
        fetch_picture: PictureFetcher | None = None,
        max_capsule_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self.evidence_tools = _tool_names(evidence_tools)
        if not self.evidence_tools:
            raise ValueError("CitationCapsuleMiddleware needs at least one evidence tool")
        if max_capsule_tokens is not None and max_capsule_tokens < 1:
            raise ValueError(f"max_capsule_tokens must be positive, got {max_capsule_tokens}")
        self.cite_tools = frozenset({cite_tool_name}) if cite_tool_name else frozenset[str]()
        self.tools = [cite_tool(cite_tool_name)] if cite_tool_name else []
        self.fetch_picture = fetch_picture
        self.max_capsule_tokens = max_capsule_tokens

    def _begin(self, state: CapsuleState) -> dict[str, Any] | None:
        ledger = _load(state)
        if ledger is not None and ledger.in_progress:
            return None  # a resumed question keeps its identity
        ledger = ledger or EvidenceLedger()
        messages = state["messages"]
        boundary = ledger.ended_at if ledger.ended_at is not None else max(len(messages) - 1, 0)
        return {LEDGER_KEY: ledger.begin_question(boundary).to_json()}

    def _record(self, state: CapsuleState) -> tuple[EvidenceLedger | None, EvidenceLedger | None]:
        ledger = _load(state)
        if ledger is None:
            return None, None
        messages = state["messages"]
        start = min(ledger.question or 0, len(messages))
        history = _observed(messages, start, self.evidence_tools, self.cite_tools)
        return ledger, record_messages(ledger, history, owned_tools=self.evidence_tools)

    def _sync(self, state: CapsuleState) -> dict[str, Any] | None:
        before, after = self._record(state)
        if after is None or after is before:  # record_messages returns its input when unchanged
            return None
        return {LEDGER_KEY: after.to_json()}

    def _end(self, state: CapsuleState) -> dict[str, Any] | None:
        _, ledger = self._record(state)
        if ledger is None or ledger.question is None:
            return None
        return {LEDGER_KEY: ledger.end_question(len(state["messages"])).to_json()}

    def _request(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], Compaction]:
        messages, report = _compact(
            request.messages,
            _load(request.state),
            evidence_tools=self.evidence_tools,
            fetch_picture=self.fetch_picture,
            max_capsule_tokens=self.max_capsule_tokens,
        )
        return request.override(messages=cast("list[AnyMessage]", messages)), report

    def before_agent(self, state: CapsuleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Begin a question, or resume the one in progress."""
        return self._begin(state)

    async def abefore_agent(
        self, state: CapsuleState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        return self._begin(state)

    def before_model(self, state: CapsuleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the retrievals and citations so far, so the cite tool can check ids."""
        return self._sync(state)

    async def abefore_model(
        self, state: CapsuleState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        return self._sync(state)

    def after_agent(self, state: CapsuleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the answer's citations and end the question."""
        return self._end(state)

    async def aafter_agent(
        self, state: CapsuleState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        return self._end(state)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Send the compacted history; the state keeps the real one."""
        compacted, report = self._request(request)
        _announce(report)
        return handler(compacted)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        compacted, report = self._request(request)
        await _aannounce(report)
        return await handler(compacted)


# -- context edit and LCEL step ---------------------------------------------------------------

LedgerSource = EvidenceLedger | Callable[[], EvidenceLedger | None] | None
"""A ledger, or a callable returning the current one each time it is needed."""


def _resolve(ledger: LedgerSource) -> EvidenceLedger | None:
    return ledger() if callable(ledger) else ledger


@dataclass
class CitationCapsuleEdit:
    """The capsule rewrite as a `ContextEdit`, for `ContextEditingMiddleware(edits=[...])`.

    `ContextEditingMiddleware` hands edits a deep copy of the request's messages and
    no state, so the ledger comes from the edit itself: a fixed ledger, or a
    callable returning the current one. Use `CitationCapsuleMiddleware` when the
    agent should keep the ledger in its state.

    Usage:
        .. code-block:: python

            edit = CitationCapsuleEdit(ledger=lambda: store.ledger(thread_id),
                                       evidence_tools=["search"])
            middleware = ContextEditingMiddleware(edits=[edit, ClearToolUsesEdit(
                exclude_tools=["search", "cite"])])
    """

    ledger: LedgerSource
    """The ledger, or a zero-argument callable returning it."""
    evidence_tools: Sequence[str]
    """Names of the evidence tools."""
    trigger: int = 0
    """Compact only when the messages exceed this many tokens (0: always)."""
    fetch_picture: PictureFetcher | None = None
    """Fetches cited pictures' bytes; without it no pictures are attached."""
    max_capsule_tokens: int | None = None
    """Optional hard bound on the capsule."""

    def apply(
        self,
        messages: list[AnyMessage],
        *,
        count_tokens: Callable[[Sequence[BaseMessage]], int],
    ) -> None:
        """Rewrite `messages` in place (the middleware passes its own copy).

        Raises:
            capsa.errors.CompactionRefused: evidence exists that the ledger does not cover.
        """
        if not messages or (self.trigger and count_tokens(messages) <= self.trigger):
            return
        compacted, report = _compact(
            messages,
            _resolve(self.ledger),
            evidence_tools=self.evidence_tools,
            fetch_picture=self.fetch_picture,
            max_capsule_tokens=self.max_capsule_tokens,
        )
        _announce(report)
        messages[:] = compacted  # type: ignore[assignment]


@overload
def capsule_messages(
    messages: Sequence[BaseMessage],
    *,
    ledger: LedgerSource,
    evidence_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_capsule_tokens: int | None = None,
) -> list[BaseMessage]: ...


@overload
def capsule_messages(
    messages: None = None,
    *,
    ledger: LedgerSource,
    evidence_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_capsule_tokens: int | None = None,
) -> Runnable[Sequence[BaseMessage], list[BaseMessage]]: ...


def capsule_messages(
    messages: Sequence[BaseMessage] | None = None,
    *,
    ledger: LedgerSource,
    evidence_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_capsule_tokens: int | None = None,
) -> list[BaseMessage] | Runnable[Sequence[BaseMessage], list[BaseMessage]]:
    """Compact a message history like `trim_messages`, but keep what answers cited.

    Called with messages, returns the compacted list (a new list; the input and
    its messages are untouched). Called without, returns a `RunnableLambda` for an
    LCEL chain, which reads the ledger afresh on every call when `ledger` is a callable.

    Args:
        messages: The stored history, or None for a runnable.
        ledger: The `EvidenceLedger` carried beside the history, or a callable returning it.
        evidence_tools: Names of the evidence tools.
        fetch_picture: Fetches cited pictures' bytes; without it none are attached.
        max_capsule_tokens: Optional hard bound on the capsule.

    Raises:
        capsa.errors.CompactionRefused: evidence exists that the ledger does not cover.

    Usage:
        .. code-block:: python

            chain = (
                capsule_messages(ledger=lambda: ledgers[thread], evidence_tools=["search"])
                | model
            )
    """
    tools = frozenset(evidence_tools)

    def run(history: Sequence[BaseMessage]) -> list[BaseMessage]:
        compacted, report = _compact(
            history,
            _resolve(ledger),
            evidence_tools=tools,
            fetch_picture=fetch_picture,
            max_capsule_tokens=max_capsule_tokens,
        )
        _announce(report)
        return compacted

    if messages is None:
        return RunnableLambda(run, name="capsule_messages")
    return run(messages)
