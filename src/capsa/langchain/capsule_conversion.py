"""LangChain messages to capsa's neutral records and back, for the citation capsule.

`to_core` reads a LangChain message into a `capsa.capsule.Message`: tool calls,
tool names, the evidence an evidence tool's artifact (or its capsa-rendered text)
carries, a cite tool's accepted ids, and native citation annotations. `compact`
runs the core compaction on a converted copy and converts back: a message the
core did not change comes back as the caller's very object, a changed one as a
copy with new content, or without the tool calls the core took off the wire
(every trace of them: ``tool_calls``, provider content blocks such as Anthropic's
``tool_use``, and raw ``additional_kwargs["tool_calls"]``). Nothing here decides
anything; `capsa.capsule` does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from capsa.budget.render import source_name
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
    TokenCounter,
    ToolCall,
    compact_with_report,
    estimate_tokens,
    parse_evidence,
)
from capsa.capsule.compaction import LOW_WATER
from capsa.guard.shapes import label_of, page_of, refs_of

__all__ = [
    "EVENT",
    "LEDGER_KEY",
    "Observe",
    "aannounce",
    "announce",
    "chunk_id",
    "compact",
    "evidence_of",
    "keys",
    "load_ledger",
    "stamp",
    "to_core",
]

EVENT = "capsa.capsule"
"""Name of the custom callback event reporting each compaction."""

LEDGER_KEY = "capsa_ledger"
"""Agent-state key (and stateless input/output key) holding the ledger's JSON."""

_DIGEST = re.compile(r"[0-9a-f]{64}")

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


@functools.lru_cache(maxsize=16)
def _parse(text: str) -> EvidenceLedger:
    # A model call reads the same JSON several times (before_model, the model call, the
    # tools); ledgers are frozen, so sharing one parsed copy is safe.
    return EvidenceLedger.from_json(text)


def load_ledger(state: Mapping[str, Any]) -> EvidenceLedger | None:
    """The ledger in an agent state (JSON string, dict or `EvidenceLedger`), or None."""
    stored = state.get(LEDGER_KEY)
    if not stored:
        return None
    if isinstance(stored, EvidenceLedger):
        return stored
    if isinstance(stored, Mapping):
        return EvidenceLedger.model_validate(stored)
    return _parse(str(stored))


# -- documents <-> evidence ------------------------------------------------------------------


def chunk_id(doc: Document) -> str:
    """The id a document is cited by: ``capsa_chunk_id``, its id, ``chunk_id``, or a hash.

    A bare 64-hex digest (`CapsaLoader` ids documents by their sha256) is
    shortened to its first 12 characters: the model copies ids into
    citations, and 64 characters cost tokens and invite copying errors.
    """
    meta = doc.metadata
    for candidate in (meta.get("capsa_chunk_id"), doc.id, meta.get("chunk_id")):
        if candidate:
            text = str(candidate)
            return text[:12] if _DIGEST.fullmatch(text) else text
    source = str(meta.get("source", ""))
    return hashlib.sha256(f"{source}\n{doc.page_content}".encode()).hexdigest()[:16]


def stamp(doc: Document, collection: str | None) -> Document:
    """A copy of `doc` carrying its chunk id, document id and collection in metadata."""
    identity = chunk_id(doc)
    meta = dict(doc.metadata)
    meta["capsa_chunk_id"] = identity
    meta.setdefault(
        "capsa_document_id", str(meta.get("document_id") or meta.get("source") or identity)
    )
    if collection is not None:
        meta.setdefault("collection", collection)
    return Document(page_content=doc.page_content, metadata=meta, id=identity)


def _document_of(item: Mapping[str, Any]) -> Document | None:
    """A Document from its dict form, as a checkpointer gives back a tool's artifact.

    LangGraph's serializer restores a `ToolMessage` whose artifact held Documents
    with each Document as ``{"id", "metadata", "page_content", "type": "Document"}``
    (``model_dump``, also what `messages_to_dict` writes); LangChain's own
    serialisation (``dumpd``) nests the same fields under ``kwargs``.
    """
    data = item.get("kwargs") if item.get("lc") == 1 else item
    if not isinstance(data, Mapping) or not isinstance(data.get("page_content"), str):
        return None
    metadata = data.get("metadata")
    identity = data.get("id")
    return Document(
        page_content=data["page_content"],
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        id=str(identity) if identity is not None else None,
    )


def evidence_of(item: Any) -> Evidence | None:
    """An `Evidence` from a Document, an Evidence, or either's dict form; None otherwise."""
    if isinstance(item, Evidence):
        return item
    if isinstance(item, Mapping) and "chunk_id" in item:
        return Evidence.model_validate(item)
    if isinstance(item, Mapping):
        item = _document_of(item)
    if not isinstance(item, Document):
        return None
    meta = item.metadata
    identity = chunk_id(item)
    uri = source_name(meta.get("source") or meta.get("uri") or meta.get("url"))
    return Evidence(
        chunk_id=identity,
        content=item.page_content,
        document_id=str(
            meta.get("capsa_document_id") or meta.get("document_id") or uri or identity
        ),
        title=label_of(meta.get("title")),
        uri=str(uri) if uri else None,
        collection=label_of(meta.get("collection")),
        picture_refs=refs_of(meta.get("picture_refs")),
        page=page_of(meta),
    )


def _artifact_evidence(message: ToolMessage) -> tuple[Evidence, ...] | None:
    artifact = message.artifact
    if isinstance(artifact, Sequence) and not isinstance(artifact, str | bytes):
        found = [e for e in (evidence_of(item) for item in artifact) if e is not None]
        if found or not artifact:
            return tuple(found)
    return parse_evidence(message.text) if isinstance(message.content, str | list) else None


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
class Observe:
    """Which tools' returns carry evidence and which carry citations."""

    evidence_tools: frozenset[str]
    cite_tools: frozenset[str] = frozenset()
    names: Mapping[str, str] = field(default_factory=dict)
    """Tool call id to tool name, for returns that do not name their tool."""

    @classmethod
    def of(
        cls,
        messages: Sequence[BaseMessage],
        evidence_tools: Iterable[str],
        cite_tools: Iterable[str] = (),
    ) -> Observe:
        names = {
            call_id: call["name"]
            for m in messages
            if isinstance(m, AIMessage)
            for call in m.tool_calls
            if (call_id := call.get("id"))
        }
        return cls(frozenset(evidence_tools), frozenset(cite_tools), names)


def to_core(message: BaseMessage, key: int, observe: Observe) -> Message:
    """Convert one LangChain message; `key` is its position, kept for the way back."""
    role = _ROLES.get(message.type) or getattr(message, "role", "user")
    fields: dict[str, Any] = {}
    if isinstance(message, AIMessage):
        fields["tool_calls"] = tuple(
            ToolCall(id=call.get("id") or "", name=call["name"], args=call["args"])
            for call in message.tool_calls
        )
        fields["citations"] = _annotations(message)
    elif isinstance(message, ToolMessage):
        fields["tool_call_id"] = message.tool_call_id
        fields["tool_name"] = message.name
        name = message.name or observe.names.get(message.tool_call_id)
        if name in observe.evidence_tools:
            fields["evidence"] = _artifact_evidence(message)
        elif name in observe.cite_tools and isinstance(message.artifact, list):
            fields["citations"] = tuple(
                CitationRef(chunk_id=str(i)) for i in message.artifact if isinstance(i, str)
            )
    if role not in ("system", "user", "assistant", "tool"):
        role = "user"
    return Message(role=role, parts=_parts(message.content), key=str(key), **fields)


def keys(messages: Sequence[BaseMessage]) -> list[str | None]:
    """The messages' ids, the handles a ledger anchors its question on."""
    return [m.id for m in messages]


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


_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call", "server_tool_use"})
"""Content block types that carry a tool call inside an assistant message's content."""


def _names_call(item: Any, removed: frozenset[str]) -> bool:
    if not isinstance(item, Mapping):
        return False
    return item.get("id") in removed or item.get("call_id") in removed


def _without_calls(message: BaseMessage, removed: frozenset[str]) -> BaseMessage:
    """A copy of an assistant message with no trace of the `removed` tool calls."""
    update: dict[str, Any] = {}
    if isinstance(message, AIMessage):
        update["tool_calls"] = [c for c in message.tool_calls if c.get("id") not in removed]
        chunks = getattr(message, "tool_call_chunks", None)
        if chunks:
            update["tool_call_chunks"] = [c for c in chunks if c.get("id") not in removed]
    if isinstance(message.content, list):
        update["content"] = [
            block
            for block in message.content
            if not (
                isinstance(block, Mapping)
                and block.get("type") in _CALL_BLOCKS
                and _names_call(block, removed)
            )
        ]
    raw = message.additional_kwargs.get("tool_calls")
    if raw:
        kept = [call for call in raw if not _names_call(call, removed)]
        kwargs = {k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"}
        update["additional_kwargs"] = kwargs | ({"tool_calls": kept} if kept else {})
    return message.model_copy(update=update)


def _back(
    result: Iterable[Message], originals: Sequence[BaseMessage], converted: Sequence[Message]
) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for message in result:
        if message.key is None:
            out.append(HumanMessage(content=_content(message.parts)))
            continue
        index = int(message.key)
        original, before = originals[index], converted[index]
        if message is before:
            out.append(original)
            continue
        if message.parts != before.parts:
            original = original.model_copy(update={"content": _content(message.parts)})
        removed = {c.id for c in before.tool_calls} - {c.id for c in message.tool_calls}
        if removed:
            original = _without_calls(original, frozenset(removed))
        out.append(original)
    return out


def compact(
    messages: Sequence[BaseMessage],
    ledger: EvidenceLedger | None,
    *,
    evidence_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_tokens: int | None = None,
    tokenizer: TokenCounter = estimate_tokens,
    cite_tools: Iterable[str] = (),
    low_water: float = LOW_WATER,
) -> tuple[list[BaseMessage], Compaction]:
    """Compact LangChain messages through the core; returns the new list and the report.

    `cite_tools` names the cite tools whose exchanges leave the wire once their
    question ended (see `capsa.capsule.compact_with_report`)."""
    observe = Observe.of(messages, evidence_tools)
    converted = [to_core(m, i, observe) for i, m in enumerate(messages)]
    report = compact_with_report(
        converted,
        ledger,
        owned_tools=observe.evidence_tools,
        fetch_picture=fetch_picture,
        max_tokens=max_tokens,
        tokenizer=tokenizer,
        cite_tools=cite_tools,
        low_water=low_water,
    )
    return _back(report.messages, messages, converted), report


def _event(report: Compaction) -> dict[str, Any]:
    return {
        "boundary": report.boundary,
        "rewritten": report.rewritten,
        "shown": list(report.shown),
        "referenced": list(report.referenced),
        "unshown": list(report.unshown),
        "uncounted": list(report.uncounted),
        "cite_calls_removed": list(report.cite_calls_removed),
        "kept_unknown": report.kept_unknown,
        "tokens_added": report.tokens_added,
        "attached_pictures": [p.ref for p in report.attached],
        "dropped_pictures": [
            {"ref": d.picture.ref, "chunk_id": d.picture.chunk_id, "reason": d.reason}
            for d in report.dropped
        ],
    }


def announce(report: Compaction) -> None:
    """Report a compaction as the ``capsa.capsule`` custom callback event, when in a run."""
    with contextlib.suppress(RuntimeError):  # outside a run nobody listens
        dispatch_custom_event(EVENT, _event(report))


async def aannounce(report: Compaction) -> None:
    """Async twin of `announce`."""
    with contextlib.suppress(RuntimeError):
        await adispatch_custom_event(EVENT, _event(report))
