"""Attached files beside retrieval: extraction outcomes packed into one context.

A user who attaches ``report.pdf`` to a question expects the model to read it
even when the model has no file support, and expects to be told when it could
not. This joins the guard and the packer: extracted files become attached
passages that share the window with retrieval (`Budget.attachment_share`), and
every file that did not make it, refused by the guard or dropped by the
packer, is named in a notice the model sees too.

Files arrive as content blocks (``{"type": "file", "base64": ..., "mime_type":
..., "filename": ...}``, the shape LangChain's standard blocks and most chat
APIs share); `read_file_block` takes one through the guard
(`read_file_blocks` a message's worth), and an `ExtractionCache` keeps each
outcome by content hash, so a file sent again on a later turn is not parsed
again. Adapters only find the blocks in their framework's messages.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from capsa.budget.pack import pack
from capsa.budget.packet import Budget, Packet, Passage
from capsa.budget.relevance import Scorer
from capsa.budget.tokens import TokenizerLike, as_tokenizer
from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    ExtractionLimits,
    TextExtractor,
    extract_attachment,
    safe_label,
)
from capsa.guard.extract import Extracted, Omission
from capsa.markup import escape_attribute

__all__ = [
    "AttachmentContext",
    "ExtractionCache",
    "RecentCache",
    "attachment_context",
    "attachment_passages",
    "block_filename",
    "read_file_block",
    "read_file_blocks",
]


V = TypeVar("V")


class RecentCache(Generic[V]):
    """Values by key, at most `size` of them; the least recently used go first.

    Thread-safe: a middleware serves concurrent calls.

    Examples:
        >>> recent: RecentCache[str] = RecentCache(size=1)
        >>> recent.put("a", "1"); recent.put("b", "2")
        >>> recent.get("a"), recent.get("b"), len(recent)
        (None, '2', 1)
    """

    _noun = "value"

    def __init__(self, size: int = 256) -> None:
        if size < 1:
            raise ValueError(f"a {type(self).__name__} holds at least 1 {self._noun}, "
                             f"got size={size}")
        self.size = size
        self._values: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str) -> V | None:
        """The value kept under `key`, marked as recently used; None when absent."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: str, value: V) -> None:
        """Keep `value` under `key`, dropping the least recently used beyond `size`."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)


class ExtractionCache(RecentCache[Extracted | Omission]):
    """Extraction outcomes by content hash and label; the least recently used go first.

    Thread-safe: a middleware serves concurrent calls. An outcome is the
    file's text or its refusal; a refusal is cached too, so a hostile file
    costs its parse once.

    Examples:
        >>> cache = ExtractionCache(size=2)
        >>> len(cache)
        0
    """

    _noun = "outcome"


def block_filename(block: Mapping[str, Any]) -> str:
    """The file name a content block gives, wherever its provider puts it; ``""`` if none.

    Examples:
        >>> block_filename({"type": "file", "extras": {"filename": "q3.pdf"}})
        'q3.pdf'
    """
    extras = block.get("extras") or {}
    metadata = block.get("metadata") or {}
    for candidate in (block.get("filename"), extras.get("filename"), metadata.get("filename"),
                      block.get("name")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return ""


def read_file_blocks(
    blocks: Sequence[Mapping[str, Any]],
    *,
    cache: ExtractionCache | None = None,
    extractor: TextExtractor | None = None,
    limits: ExtractionLimits | None = None,
) -> tuple[list[Extracted], list[Omission]]:
    """One message's file blocks through the guard: what was read, and what was not.

    Each block is `read_file_block` at its position; a file found inside
    another (an e-mail's attachment) is an outcome of its own.

    Examples:
        >>> read, refused = read_file_blocks([{"type": "file", "url": "https://x/y.pdf"}])
        >>> read, [o.reason for o in refused]
        ([], ['unsupported_type'])
    """
    outcomes: list[Extracted | Omission] = []
    for position, block in enumerate(blocks):
        outcome = read_file_block(block, position, cache=cache, extractor=extractor,
                                  limits=limits)
        outcomes += outcome.flattened() if isinstance(outcome, Extracted) else (outcome,)
    return ([o for o in outcomes if isinstance(o, Extracted)],
            [o for o in outcomes if isinstance(o, Omission)])


def read_file_block(
    block: Mapping[str, Any],
    position: int = 0,
    *,
    cache: ExtractionCache | None = None,
    extractor: TextExtractor | None = None,
    limits: ExtractionLimits | None = None,
) -> Extracted | Omission:
    """Take one file content block through the guard: its text, or why not.

    Only inline (``base64``) data is read: a block given by URL or provider
    file id is refused as ``unsupported_type``, because capsa never fetches.
    Undecodable base64 is ``corrupt``. Everything else is `extract_attachment`,
    with its refusals recorded as an `Omission`.

    Args:
        block: a ``{"type": "file", ...}`` content block.
        position: the block's position among the message's files (labels unnamed files).
        cache: outcomes by content hash and label; None to extract every time.
        extractor: the guard's extractor (None: the shared isolated pool).
        limits: the guard's limits (None: the attachment preset).

    Examples:
        >>> read_file_block({"type": "file", "url": "https://x/y.pdf"}).reason
        'unsupported_type'
    """
    label = safe_label(block_filename(block), index=position)
    if "base64" not in block:
        where = "a URL" if "url" in block else "a provider file id"
        return Omission(label=label, stage="sniff", reason="unsupported_type",
                        detail=f"the file is given by {where}; capsa never fetches it")
    try:
        payload = base64.b64decode(block["base64"], validate=True)
    except (binascii.Error, ValueError, TypeError):
        return Omission(label=label, stage="size", reason="corrupt",
                        detail="the base64 data does not decode")
    key = hashlib.sha256(payload).hexdigest() + "|" + label
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return cached
    outcome: Extracted | Omission
    try:
        outcome = extract_attachment(
            Attachment(label=label, media_type=block.get("mime_type"), payload=payload),
            extractor, limits, index=position)
    except (IngestionRejected, ExtractionFailed) as error:
        outcome = Omission.from_error(error)
    if cache is not None:
        cache.put(key, outcome)
    return outcome


class AttachmentContext(BaseModel):
    """The text to put before the model, and the facts behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    text: str
    """The rendered packet followed by the notice (if any); fits the budget."""
    packet: Packet
    """The packet of attached and retrieved passages, with a receipt each."""
    notice: str
    """One line per attached file the model will not read in full, with the reason; or ""."""
    omitted: tuple[Omission, ...]
    """Files the guard refused."""


def attachment_passages(extracted: Sequence[Extracted]) -> list[Passage]:
    """Extracted files as attached passages, identified by content hash.

    Examples:
        >>> one = Extracted(label="a.txt", kind="text", media_type=None, text="hi",
        ...                 byte_size=2, sha256="ab" * 32)
        >>> attachment_passages([one])[0].id
        'attached-abababababab'
    """
    return [Passage(id=f"attached-{item.sha256[:12]}", text=item.text, source=item.label,
                    metadata={"capsa_kind": item.kind, "capsa_sha256": item.sha256})
            for item in extracted]


def attachment_context(query: str, extracted: Sequence[Extracted],
                       omitted: Sequence[Omission], budget: Budget, *,
                       passages: Sequence[Passage] = (), tokenizer: TokenizerLike | None = None,
                       scorer: Scorer | None = None) -> AttachmentContext:
    """Pack attached files beside retrieved passages; say what did not make it.

    The notice names each refused file with its reason ("report.pdf: parser
    failed (timeout)") and each attached file the packer dropped. It is
    counted inside the budget: the packet is packed into what the notice
    leaves.

    Examples:
        >>> one = Extracted(label="a.txt", kind="text", media_type=None,
        ...                 text="The hotel cap is EUR 165.", byte_size=25, sha256="ab" * 32)
        >>> gone = Omission(label="b.pdf", stage="parser", reason="timeout", detail="...")
        >>> context = attachment_context("hotel cap", [one], [gone], Budget(max_tokens=200))
        >>> "EUR 165" in context.text, context.notice
        (True, 'Attached files not included: b.pdf: parser failed (timeout).')
    """
    count = as_tokenizer(tokenizer)
    attached = attachment_passages(extracted)
    problems = [f"{escape_attribute(o.label)}: {_reason(o)}" for o in omitted]
    notice = _notice(problems)
    room = budget.max_tokens - (count(notice) + 2 if notice else 0)
    packet = _pack(query, passages, attached, budget, room, count, scorer)
    dropped = {r.passage_id for r in packet.receipts if r.dropped is not None}
    late = [f"{escape_attribute(p.source or p.id)}: did not fit the context budget"
            for p in attached if p.id in dropped]
    if late:
        notice = _notice(problems + late)
        room = budget.max_tokens - (count(notice) + 2)
        packet = _pack(query, passages, attached, budget, room, count, scorer)
    text = _join(packet.render(), notice)
    while count(text) > budget.max_tokens and room > 1:  # rounding in the tokenizer
        room -= count(text) - budget.max_tokens
        packet = _pack(query, passages, attached, budget, room, count, scorer)
        text = _join(packet.render(), notice)
    return AttachmentContext(text=text, packet=packet, notice=notice, omitted=tuple(omitted))


def _pack(query: str, passages: Sequence[Passage], attached: Sequence[Passage], budget: Budget,
          room: int, tokenizer: TokenizerLike | None, scorer: Scorer | None) -> Packet:
    return pack(query, passages, budget.model_copy(update={"max_tokens": max(1, room)}),
                attachments=attached, tokenizer=tokenizer, scorer=scorer)


def _join(rendered: str, notice: str) -> str:
    return "\n\n".join(part for part in (rendered, notice) if part)


def _reason(omission: Omission) -> str:
    if omission.stage == "parser":
        return f"parser failed ({omission.reason})"
    return f"refused ({omission.reason.replace('_', ' ')})"


def _notice(lines: Sequence[str]) -> str:
    return f"Attached files not included: {'; '.join(lines)}." if lines else ""
