"""LlamaIndex messages and nodes to capsa's neutral records and back.

`to_core` reads a `ChatMessage` into a `capsa.capsule.Message` (tool calls from
`ToolCallBlock`s or ``additional_kwargs``, `CitationBlock` citations, and for an
evidence tool's return the chunks its capsa-rendered text shows); `compact` runs
the core compaction and converts back, handing unchanged messages through as the
caller's objects. `evidence` turns a retrieved node into an `Evidence`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index_instrumentation import get_dispatcher

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
    TokenCounter,
    ToolCall,
    compact_with_report,
    estimate_tokens,
    parse_evidence,
)
from capsa.capsule.compaction import LOW_WATER
from capsa.guard.shapes import label_of, page_of, refs_of

__all__ = [
    "WHOLE_EVIDENCE_KEY",
    "CapsuleCompactedEvent",
    "announce",
    "compact",
    "convert",
    "evidence",
    "keys",
    "to_core",
    "with_whole_evidence",
    "without_whole_evidence",
]

WHOLE_EVIDENCE_KEY = "capsa_evidence"
"""``additional_kwargs`` key of a stored budgeted return: its chunks, whole, as JSON.

A LlamaIndex agent stores only a tool's text, and a budgeted return shows some
chunks in part or by id; `CapsuleMemory` keeps the chunks whole under this key
(LangChain keeps them in the tool artifact), so compaction and `recall` work from
the whole chunks. Views never carry it: providers' adapters copy
``additional_kwargs`` onto the wire."""

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


class CapsuleCompactedEvent(BaseEvent):
    """What one compaction kept and dropped, for instrumentation handlers."""

    boundary: int
    rewritten: int
    shown_chunk_ids: list[str]
    referenced_chunk_ids: list[str]
    unshown_chunk_ids: list[str]
    uncounted_chunk_ids: list[str]
    cite_calls_removed: list[str]
    attached_pictures: list[str]
    dropped_pictures: list[str]

    @classmethod
    def class_name(cls) -> str:
        """Stable name for instrumentation handlers."""
        return "CapsuleCompactedEvent"


def announce(report: Compaction) -> None:
    """Report a compaction as a `CapsuleCompactedEvent`."""
    _dispatcher.event(
        CapsuleCompactedEvent(
            boundary=report.boundary,
            rewritten=report.rewritten,
            shown_chunk_ids=list(report.shown),
            referenced_chunk_ids=list(report.referenced),
            unshown_chunk_ids=list(report.unshown),
            uncounted_chunk_ids=list(report.uncounted),
            cite_calls_removed=list(report.cite_calls_removed),
            attached_pictures=[p.ref for p in report.attached],
            dropped_pictures=[f"{d.picture.ref}: {d.reason}" for d in report.dropped],
        )
    )


def evidence(node: NodeWithScore, collection: str | None = None) -> Evidence:
    """The chunk a retrieved node is, as the model is shown it."""
    inner = node.node
    meta = inner.metadata
    uri = meta.get("source") or meta.get("file_path") or meta.get("url")
    return Evidence(
        chunk_id=inner.node_id,
        content=inner.get_content(metadata_mode=MetadataMode.NONE),
        document_id=str(inner.ref_doc_id or meta.get("document_id") or uri or inner.node_id),
        title=label_of(meta.get("title")) or label_of(meta.get("file_name")),
        uri=str(uri) if uri else None,
        collection=label_of(meta.get("collection")) or collection,
        picture_refs=refs_of(meta.get("picture_refs")),
        page=page_of(meta),
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


def to_core(
    message: ChatMessage,
    key: int,
    evidence_tools: frozenset[str] = frozenset(),
    names: Mapping[str, str] | None = None,
) -> Message:
    """Convert one message; `key` is its position, kept for the way back.

    A return of one of `evidence_tools` (named by ``additional_kwargs`` or by the
    call it answers, through `names`) carries the chunks its text shows.
    """
    kwargs = message.additional_kwargs
    role = _ROLES.get(MessageRole(message.role), "user")
    call_id = kwargs.get("tool_call_id")
    tool = kwargs.get("name") or kwargs.get("tool_name") or (names or {}).get(call_id or "")
    shown = None
    if role == "tool" and tool in evidence_tools:
        kept = kwargs.get(WHOLE_EVIDENCE_KEY)
        shown = (
            tuple(Evidence.model_validate(e) for e in kept)
            if isinstance(kept, list)
            else parse_evidence(
                "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
            )
        )
    return Message(
        role=role,
        parts=tuple(_part(b) for b in message.blocks),
        tool_calls=_tool_calls(message),
        tool_call_id=call_id,
        tool_name=tool,
        citations=_citations(message),
        evidence=shown,
        key=str(key),
    )


def with_whole_evidence(message: ChatMessage, chunks: Sequence[Evidence]) -> ChatMessage:
    """A copy of a stored tool return that also keeps `chunks` whole (`WHOLE_EVIDENCE_KEY`)."""
    kept = [e.model_dump(mode="json") for e in chunks]
    kwargs = {**message.additional_kwargs, WHOLE_EVIDENCE_KEY: kept}
    return message.model_copy(update={"additional_kwargs": kwargs})


def without_whole_evidence(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """`messages` with no `WHOLE_EVIDENCE_KEY`, copying only the messages that had it.

    What a view sends must hold only what the model is shown: an adapter that
    copies ``additional_kwargs`` onto the wire would otherwise send every chunk whole.
    """
    out: list[ChatMessage] = []
    for message in messages:
        if WHOLE_EVIDENCE_KEY in message.additional_kwargs:
            kwargs = {
                k: v for k, v in message.additional_kwargs.items() if k != WHOLE_EVIDENCE_KEY
            }
            message = message.model_copy(update={"additional_kwargs": kwargs})
        out.append(message)
    return out


def convert(messages: Sequence[ChatMessage], evidence_tools: Iterable[str]) -> list[Message]:
    """Convert a history, naming tool returns from the calls they answer."""
    owned = frozenset(evidence_tools)
    names = {call.id: call.name for m in messages for call in _tool_calls(m)}
    return [to_core(m, i, owned, names) for i, m in enumerate(messages)]


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


def _raw_call_id(raw: Any) -> str:
    data = raw if isinstance(raw, Mapping) else getattr(raw, "__dict__", {})
    return str(data.get("id") or "")


def _without_calls(message: ChatMessage, removed: frozenset[str]) -> ChatMessage:
    """A copy of an assistant message with no trace of the `removed` tool calls."""
    blocks = [
        b
        for b in message.blocks
        if not (isinstance(b, ToolCallBlock) and (b.tool_call_id or "") in removed)
    ]
    kwargs = dict(message.additional_kwargs)
    raw = kwargs.pop("tool_calls", None)
    if raw:
        kept = [call for call in raw if _raw_call_id(call) not in removed]
        if kept:
            kwargs["tool_calls"] = kept
    return message.model_copy(update={"blocks": blocks, "additional_kwargs": kwargs})


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
        original, before = originals[index], converted[index]
        if message is before:
            out.append(original)
            continue
        if message.parts != before.parts:
            original = original.model_copy(update={"blocks": [_block(p) for p in message.parts]})
        removed = {c.id for c in before.tool_calls} - {c.id for c in message.tool_calls}
        if removed:
            original = _without_calls(original, frozenset(removed))
        out.append(original)
    return out


def compact(
    history: Sequence[ChatMessage],
    ledger: EvidenceLedger | None,
    *,
    evidence_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_tokens: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
    cite_tools: Iterable[str] = (),
    low_water: float = LOW_WATER,
) -> list[ChatMessage]:
    """Compact a LlamaIndex history through the core and announce what was done.

    `cite_tools` names the cite tools whose exchanges leave the view once their
    question ended (see `capsa.capsule.compact_with_report`); a removed call leaves
    no `ToolCallBlock` and no ``additional_kwargs["tool_calls"]`` entry behind."""
    owned = frozenset(evidence_tools)
    converted = convert(history, owned)
    report = compact_with_report(
        converted,
        ledger,
        owned_tools=owned,
        fetch_picture=fetch_picture,
        max_tokens=max_tokens,
        tokenizer=tokenizer,
        cite_tools=cite_tools,
        low_water=low_water,
    )
    announce(report)
    return _back(report.messages, history, converted)


def keys(messages: Sequence[Any]) -> list[str | None]:
    """LlamaIndex messages carry no id: positions are all the ledger can anchor on."""
    return [None] * len(messages)
