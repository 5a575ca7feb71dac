"""Rewrite a copy of the history so earlier evidence costs only what was cited.

Below the current question's identity, every return of an evidence tool is
rewritten: the newest one carries the capsule, every other one becomes a short
receipt. Returns are rewritten and never removed, so every tool call keeps its
return and no provider rejects the request for an orphaned call. Nothing else
changes: not other tools' returns, not cite acknowledgements, not the user's text
or pictures, and nothing at or above the current question. Cited pictures are
re-attached in one user message placed right after the capsule's tool returns.

The input is never mutated; messages that do not change are shared between input
and output, which is safe because they are frozen.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from capsa.capsule.capsule import (
    RECEIPT,
    Capsule,
    RetainedPicture,
    Tokenizer,
    build_capsule,
    estimate_tokens,
)
from capsa.capsule.ledger import EvidenceLedger
from capsa.capsule.messages import ImagePart, Message, Part, TextPart
from capsa.errors import CompactionRefused

__all__ = ["Compaction", "DroppedPicture", "PictureFetcher", "compact", "compact_with_report"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

PictureFetcher = Callable[[RetainedPicture], bytes | None]
"""Returns a picture's bytes, or None when it has none; may raise."""

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class DroppedPicture(BaseModel):
    """A cited picture that was not re-attached, and why; its label was dropped with it."""

    model_config = _CONFIG

    picture: RetainedPicture
    """The picture that was meant to be attached."""
    reason: Literal["fetch_failed", "missing", "undecodable"]
    """``fetch_failed`` the fetcher raised; ``missing`` it returned nothing;
    ``undecodable`` the bytes are not a PNG, JPEG, GIF or WebP image."""
    detail: str = ""
    """The fetcher's error, when it raised."""


class Compaction(BaseModel):
    """The compacted history and an account of what compaction did."""

    model_config = _CONFIG

    messages: tuple[Message, ...]
    """The history to send to the model."""
    capsule: Capsule
    """The capsule placed in the newest earlier evidence return (empty when none)."""
    boundary: NonNegativeInt
    """The current question's identity; input messages from here on are untouched."""
    carrier: int | None = None
    """Index in `messages` of the return carrying the capsule; None when no earlier
    evidence return exists."""
    receipts: NonNegativeInt = 0
    """Earlier evidence returns replaced by a receipt."""
    attached: tuple[RetainedPicture, ...] = ()
    """Cited pictures re-attached beside the capsule."""
    dropped: tuple[DroppedPicture, ...] = ()
    """Cited pictures that could not be re-attached, with the reason."""


def _image_type(data: bytes) -> str | None:
    for signature, mime_type in _SIGNATURES:
        if data.startswith(signature):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _fetch(
    pictures: Iterable[RetainedPicture], fetch: PictureFetcher
) -> tuple[list[Part], list[RetainedPicture], list[DroppedPicture]]:
    parts: list[Part] = []
    attached: list[RetainedPicture] = []
    dropped: list[DroppedPicture] = []
    for picture in pictures:
        try:
            data = fetch(picture)
        except Exception as exc:  # noqa: BLE001 - an unreadable picture costs itself, not the answer
            dropped.append(
                DroppedPicture(
                    picture=picture, reason="fetch_failed", detail=f"{type(exc).__name__}: {exc}"
                )
            )
            continue
        if not data:
            dropped.append(DroppedPicture(picture=picture, reason="missing"))
            continue
        mime_type = _image_type(data)
        if mime_type is None:
            dropped.append(DroppedPicture(picture=picture, reason="undecodable"))
            continue
        encoded = base64.b64encode(data).decode("ascii")
        parts += [TextPart(text=picture.label), ImagePart(base64=encoded, mime_type=mime_type)]
        attached.append(picture)
    return parts, attached, dropped


def _tool_name(message: Message, names: dict[str, str]) -> str | None:
    return message.tool_name or names.get(message.tool_call_id or "")


def _owned_returns(
    messages: Sequence[Message], end: int, owned: frozenset[str]
) -> list[int]:
    names = {call.id: call.name for m in messages[:end] for call in m.tool_calls}
    return [
        i
        for i, message in enumerate(messages[:end])
        if message.role == "tool" and _tool_name(message, names) in owned
    ]


def compact_with_report(
    messages: Sequence[Message],
    ledger: EvidenceLedger | None,
    *,
    owned_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_tokens: PositiveInt | None = None,
    tokenizer: Tokenizer = estimate_tokens,
) -> Compaction:
    """Compact a copy of the history and report what was done.

    Same contract as `compact`, which returns only the messages. Adapters use the
    report to tell their framework's event channel what was kept and dropped.

    Args:
        messages: The stored history, in order (positions are question identities).
        ledger: The ledger carried beside the history; its current question is the
            boundary.
        owned_tools: Names of the evidence tools whose earlier returns are compacted.
        fetch_picture: Fetches a cited picture's bytes. Without it no picture is
            attached. A picture whose fetch raises, returns nothing, or returns
            bytes that are not an image is dropped together with its label.
        max_tokens: Optional bound on the capsule (see `build_capsule`).
        tokenizer: Counts tokens for `max_tokens`.

    Returns:
        The compacted history with its report.

    Raises:
        CompactionRefused: Evidence returns exist that the ledger does not cover:
            no ledger (or one where no question began) while the history holds
            evidence returns, or evidence returns older than the ledger's first
            question, or a ledger whose question lies beyond the history's end.
    """
    owned = frozenset(owned_tools)
    history = list(messages)
    if ledger is None or ledger.question is None:
        if _owned_returns(history, len(history), owned):
            raise CompactionRefused(
                "the history holds evidence returns but no evidence ledger was carried, so "
                "nothing says what was cited; carry the EvidenceLedger beside the history"
            )
        return Compaction(messages=tuple(history), capsule=Capsule(), boundary=0)
    boundary = ledger.question
    if boundary > len(history):
        raise CompactionRefused(
            f"the ledger's current question arrived with {boundary} messages but the history "
            f"holds {len(history)}: the stored history was shortened after it was recorded"
        )
    earlier = _owned_returns(history, boundary, owned)
    if not earlier:
        return Compaction(messages=tuple(history), capsule=Capsule(), boundary=boundary)
    first = ledger.first_question if ledger.first_question is not None else boundary
    if earlier[0] < first:
        raise CompactionRefused(
            f"evidence returned at message {earlier[0]} predates the ledger, which began "
            f"with the question at message {first}; what that evidence supported is unknown"
        )
    capsule = build_capsule(ledger, max_tokens, before=boundary, tokenizer=tokenizer)
    carrier = earlier[-1]
    carried = TextPart(text=capsule.text or RECEIPT)
    receipt = TextPart(text=RECEIPT)
    for index in earlier:
        parts = (carried,) if index == carrier else (receipt,)
        history[index] = history[index].model_copy(update={"parts": parts})
    picture_parts: list[Part] = []
    attached: list[RetainedPicture] = []
    dropped: list[DroppedPicture] = []
    if fetch_picture is not None and capsule.pictures:
        picture_parts, attached, dropped = _fetch(capsule.pictures, fetch_picture)
    if picture_parts:
        after = carrier + 1
        while after < boundary and history[after].role == "tool":
            after += 1
        history.insert(after, Message(role="user", parts=tuple(picture_parts)))
    return Compaction(
        messages=tuple(history),
        capsule=capsule,
        boundary=boundary,
        carrier=carrier,
        receipts=len(earlier) - 1,
        attached=tuple(attached),
        dropped=tuple(dropped),
    )


def compact(
    messages: Sequence[Message],
    ledger: EvidenceLedger | None,
    *,
    owned_tools: Iterable[str],
    fetch_picture: PictureFetcher | None = None,
    max_tokens: PositiveInt | None = None,
    tokenizer: Tokenizer = estimate_tokens,
) -> list[Message]:
    """Replace earlier evidence in a copy of the history with one capsule.

    Only what earlier answers cited survives, so the model keeps its sources while
    old retrievals stop costing tokens. The stored history is never touched; the
    host sends the returned list and keeps its own.

    See `compact_with_report` for the arguments.

    Raises:
        CompactionRefused: earlier evidence exists but no ledger covering it was carried.

    Examples:
        >>> from capsa.capsule import Evidence, TextPart, ToolCall
        >>> chunk = Evidence(chunk_id="c1", content="Hotels: EUR 230.", document_id="d")
        >>> call = ToolCall(id="t1", name="search", args={"query": "hotel cap"})
        >>> history = [
        ...     Message(role="user", parts=(TextPart(text="Hotel cap?"),)),
        ...     Message(role="assistant", tool_calls=(call,)),
        ...     Message(role="tool", tool_call_id="t1", parts=(TextPart(text="[c1] ..."),)),
        ...     Message(role="assistant", parts=(TextPart(text="EUR 230 [c1]."),)),
        ...     Message(role="user", parts=(TextPart(text="And mileage?"),)),
        ... ]
        >>> ledger = (EvidenceLedger().begin_question(0)
        ...           .record_retrieval([chunk], tool="search").record_citations(["c1"])
        ...           .end_question(4).begin_question(4))
        >>> view = compact(history, ledger, owned_tools={"search"})
        >>> len(view) == len(history)  # contents shrink; no message is dropped
        True
        >>> "Hotels: EUR 230." in view[2].text
        True
    """
    return list(
        compact_with_report(
            messages,
            ledger,
            owned_tools=owned_tools,
            fetch_picture=fetch_picture,
            max_tokens=max_tokens,
            tokenizer=tokenizer,
        ).messages
    )
