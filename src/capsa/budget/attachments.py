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

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from capsa.budget.pack import pack
from capsa.budget.packet import Budget, Packet, Passage
from capsa.budget.relevance import Scorer
from capsa.budget.tokens import TokenizerLike, as_tokenizer, discounted, per_call_tokens
from capsa.errors import BudgetError, ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    ExtractionLimits,
    TextExtractor,
    extract_attachment,
    safe_label,
)
from capsa.guard.blocks import DecodedBlock, Fetcher, block_filename, decode_block
from capsa.guard.extract import Extracted, Omission
from capsa.guard.limits import DEFAULT_LIMITS
from capsa.guard.sniff import sniff
from capsa.markup import escape_attribute

__all__ = [
    "AttachmentContext",
    "BlockOutcomes",
    "ExtractionCache",
    "RecentCache",
    "SentImage",
    "attachment_context",
    "attachment_passages",
    "block_filename",
    "read_blocks",
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


class SentImage(BaseModel):
    """An image block kept in the message as it came, because the caller chose to send images.

    It was still checked: its bytes decode, are no larger than the limits
    allow, and sniff as an image (PNG, JPEG, TIFF or WebP) whatever it declared.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    label: str
    """The safe label."""
    kind: str
    """The sniffed image kind (``"png"``, ...)."""
    byte_size: int
    """Size of the decoded image."""


class BlockOutcomes(BaseModel):
    """What became of one message's content blocks."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    extracted: tuple[Extracted, ...] = ()
    """Files read through the guard (with the files found inside them)."""
    omitted: tuple[Omission, ...] = ()
    """Blocks refused, each with its true reason."""
    kept: tuple[int, ...] = ()
    """Positions (among the blocks given) of image blocks sent as they are (`SentImage`)."""


def read_blocks(
    blocks: Sequence[str | Mapping[str, Any]],
    *,
    cache: ExtractionCache | None = None,
    extractor: TextExtractor | None = None,
    limits: ExtractionLimits | None = None,
    fetch: Fetcher | None = None,
    send_images: bool = False,
) -> BlockOutcomes:
    """Every file-carrying block of one message through the guard, whatever its shape.

    Blocks that carry no file (`capsa.guard.blocks.decode_block` returns None:
    text, reasoning) are not outcomes. Every other block is read through the
    guard, kept (an image, with `send_images`), or refused with its reason: an
    adapter drops every block that is not text or in `kept`, so no block
    capsa does not understand reaches the model.

    Examples:
        >>> out = read_blocks(["hi", {"type": "image", "url": "https://x/y.png"}])
        >>> [(o.label, o.reason) for o in out.omitted]
        [('y.png', 'not_fetched')]
    """
    extracted: list[Extracted] = []
    omitted: list[Omission] = []
    kept: list[int] = []
    files = 0
    for position, block in enumerate(blocks):
        decoded = decode_block(block, files, fetch=fetch)
        if decoded is None:
            continue
        outcome = _read_decoded(decoded, files, cache=cache, extractor=extractor, limits=limits,
                                send_images=send_images)
        files += 1
        if isinstance(outcome, SentImage):
            kept.append(position)
        elif isinstance(outcome, Extracted):
            found = outcome.flattened()
            extracted += [f for f in found if isinstance(f, Extracted)]
            omitted += [f for f in found if isinstance(f, Omission)]
        else:
            omitted.append(outcome)
    return BlockOutcomes(extracted=tuple(extracted), omitted=tuple(omitted), kept=tuple(kept))


def read_file_blocks(
    blocks: Sequence[Mapping[str, Any]],
    *,
    cache: ExtractionCache | None = None,
    extractor: TextExtractor | None = None,
    limits: ExtractionLimits | None = None,
    fetch: Fetcher | None = None,
) -> tuple[list[Extracted], list[Omission]]:
    """One message's file blocks through the guard: what was read, and what was not.

    `read_blocks` without images sent, as a pair; a file found inside
    another (an e-mail's attachment) is an outcome of its own.

    Examples:
        >>> read, refused = read_file_blocks([{"type": "file", "url": "https://x/y.pdf"}])
        >>> read, [o.reason for o in refused]
        ([], ['not_fetched'])
    """
    out = read_blocks(blocks, cache=cache, extractor=extractor, limits=limits, fetch=fetch)
    return list(out.extracted), list(out.omitted)


def read_file_block(
    block: Mapping[str, Any],
    position: int = 0,
    *,
    cache: ExtractionCache | None = None,
    extractor: TextExtractor | None = None,
    limits: ExtractionLimits | None = None,
    fetch: Fetcher | None = None,
    send_images: bool = False,
) -> Extracted | Omission | SentImage:
    """Take one file-carrying content block through the guard: its text, or why not.

    Any shape `capsa.guard.blocks.decode_block` recognises (LangChain v1 and
    v0, OpenAI, Anthropic, LlamaIndex via its adapter). A file given by URL
    or path is read only through `fetch` (``not_fetched`` without one); a
    provider's file id is ``provider_file``; undecodable base64 is
    ``corrupt``. An image is read by OCR, unless `send_images` is set: then
    it is kept as an image block once its bytes sniff as an image within the
    size limit (`SentImage`). Everything else is `extract_attachment`, with
    its refusals recorded as an `Omission`.

    Args:
        block: a content block carrying a file.
        position: the block's position among the message's files (labels unnamed files).
        cache: outcomes by content hash and label; None to extract every time.
        extractor: the guard's extractor (None: the shared isolated pool).
        limits: the guard's limits (None: the attachment preset).
        fetch: reads a file given by URL or path; None to refuse those.
        send_images: keep checked images as image blocks instead of reading them by OCR.

    Examples:
        >>> read_file_block({"type": "file", "url": "https://x/y.pdf"}).reason
        'not_fetched'
    """
    decoded = decode_block(block, position, fetch=fetch)
    if decoded is None:
        return Omission(label=safe_label("", index=position), stage="sniff",
                        reason="unsupported_type", detail="the block carries no file")
    return _read_decoded(decoded, position, cache=cache, extractor=extractor, limits=limits,
                         send_images=send_images)


def _read_decoded(decoded: DecodedBlock, position: int, *, cache: ExtractionCache | None,
                  extractor: TextExtractor | None, limits: ExtractionLimits | None,
                  send_images: bool) -> Extracted | Omission | SentImage:
    if isinstance(decoded.outcome, Omission):
        return decoded.outcome
    attachment = decoded.outcome
    if send_images and decoded.media == "image":
        return _sent_image(attachment, limits or DEFAULT_LIMITS)
    key = hashlib.sha256(attachment.payload).hexdigest() + "|" + attachment.label
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return cached
    outcome: Extracted | Omission
    try:
        outcome = extract_attachment(attachment, extractor, limits, index=position)
    except (IngestionRejected, ExtractionFailed) as error:
        outcome = Omission.from_error(error)
    if cache is not None:
        cache.put(key, outcome)
    return outcome


def _sent_image(attachment: Attachment, limits: ExtractionLimits) -> SentImage | Omission:
    label = attachment.label
    size = len(attachment.payload)
    if not size:
        return Omission(label=label, stage="size", reason="empty", detail="the image is empty")
    if size > limits.max_bytes:
        return Omission(label=label, stage="size", reason="too_large",
                        detail=f"{size} bytes, over the limit of {limits.max_bytes}")
    kind = sniff(attachment.payload)
    if kind not in _IMAGE_KINDS:
        return Omission(label=label, stage="sniff", reason="type_mismatch",
                        detail=f"sent as an image, but the bytes are {kind}")
    return SentImage(label=label, kind=kind, byte_size=size)


_IMAGE_KINDS = frozenset({"png", "jpeg", "tiff", "webp"})


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
    """Extracted files as attached passages, each identified by its file name.

    The id is what the model reads in every markup form (the compact
    ``<document q3.pdf>`` included), so it is the file's safe label, not a
    hash; a second file with the same name gets ``~2`` appended, and so on.
    The content hash stays in the passage's metadata.

    Examples:
        >>> one = Extracted(label="a.txt", kind="text", media_type=None, text="hi",
        ...                 byte_size=2, sha256="ab" * 32)
        >>> [p.id for p in attachment_passages([one, one])]
        ['a.txt', 'a.txt~2']
    """
    seen: dict[str, int] = {}
    passages: list[Passage] = []
    for item in extracted:
        seen[item.label] = seen.get(item.label, 0) + 1
        handle = item.label if seen[item.label] == 1 else f"{item.label}~{seen[item.label]}"
        passages.append(Passage(id=handle, text=item.text, source=item.label,
                                metadata={"capsa_kind": item.kind, "capsa_sha256": item.sha256}))
    return passages


def attachment_context(query: str, extracted: Sequence[Extracted],
                       omitted: Sequence[Omission], budget: Budget, *,
                       passages: Sequence[Passage] = (), tokenizer: TokenizerLike | None = None,
                       scorer: Scorer | None = None) -> AttachmentContext:
    """Pack attached files beside retrieved passages; say what did not make it.

    The notice names each refused file with its reason ("report.pdf: parser
    failed (timeout)") and each attached file the packer dropped. It is
    counted inside the budget: the packet is packed into what the notice
    leaves, and ``text`` is measured with the tokenizer until it fits. A
    budget too small for the notice gets a shorter one (the count of files
    left out), then none; the receipts and `omitted` still say everything.

    Examples:
        >>> one = Extracted(label="a.txt", kind="text", media_type=None,
        ...                 text="The hotel cap is EUR 165.", byte_size=25, sha256="ab" * 32)
        >>> gone = Omission(label="b.pdf", stage="parser", reason="timeout", detail="...")
        >>> context = attachment_context("hotel cap", [one], [gone], Budget(max_tokens=200))
        >>> "EUR 165" in context.text, context.notice
        (True, 'Attached files not included: b.pdf: parser failed (timeout).')

    Raises:
        BudgetError: the tokenizer charges more than the budget for an empty text.
    """
    count = as_tokenizer(tokenizer)
    if count("") > budget.max_tokens:
        raise BudgetError(f"the tokenizer counts {count('')} tokens for an empty packet, "
                          f"over the {budget.max_tokens}-token budget")
    attached = attachment_passages(extracted)
    problems = [f"{escape_attribute(o.label)}: {_reason(o)}" for o in omitted]
    notice = _notice(problems)
    # the notice joins the packet: a counter's charge per call (`per_call_tokens`) is paid once
    notice_cost = discounted(count, per_call_tokens(count))
    room = budget.max_tokens - (notice_cost(notice) + 2 if notice else 0)
    packet = _pack(query, passages, attached, budget, room, count, scorer)
    dropped = {r.passage_id for r in packet.receipts if r.dropped is not None}
    late = [f"{escape_attribute(p.source or p.id)}: did not fit the context budget"
            for p in attached if p.id in dropped]
    if late:
        notice = _notice(problems + late)
        room = budget.max_tokens - (notice_cost(notice) + 2)
        packet = _pack(query, passages, attached, budget, room, count, scorer)
    text = _join(packet.render(), notice)
    while count(text) > budget.max_tokens and room > 1:  # rounding in the tokenizer
        room -= count(text) - budget.max_tokens
        packet = _pack(query, passages, attached, budget, room, count, scorer)
        text = _join(packet.render(), notice)
    if count(text) > budget.max_tokens:  # the notice itself leaves no room: shorter, or none
        missing = len(problems) + len(late)
        for notice in (f"Attached files not included: {missing} (names left out for room).", ""):
            room = budget.max_tokens - (notice_cost(notice) + 2 if notice else 0)
            packet = _pack(query, passages, attached, budget, room, count, scorer)
            text = _join(packet.render(), notice)
            if count(text) <= budget.max_tokens:
                break  # without a notice it always fits: `pack` holds the bound
    return AttachmentContext(text=text, packet=packet, notice=notice, omitted=tuple(omitted))


def _pack(query: str, passages: Sequence[Passage], attached: Sequence[Passage], budget: Budget,
          room: int, tokenizer: TokenizerLike | None, scorer: Scorer | None) -> Packet:
    """`pack` into `room`, or the least room `pack` accepts (the caller measures the result)."""
    least = as_tokenizer(tokenizer)("")  # a tokenizer may charge for nothing at all
    return pack(query, passages, budget.model_copy(update={"max_tokens": max(1, least, room)}),
                attachments=attached, tokenizer=tokenizer, scorer=scorer)


def _join(rendered: str, notice: str) -> str:
    return "\n\n".join(part for part in (rendered, notice) if part)


def _reason(omission: Omission) -> str:
    if omission.stage == "parser":
        return f"parser failed ({omission.reason})"
    return f"refused ({omission.reason.replace('_', ' ')})"


def _notice(lines: Sequence[str]) -> str:
    return f"Attached files not included: {'; '.join(lines)}." if lines else ""
