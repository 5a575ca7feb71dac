"""Attached files beside retrieval: extraction outcomes packed into one context.

A user who attaches ``report.pdf`` to a question expects the model to read it
even when the model has no file support, and expects to be told when it could
not. This joins the guard and the packer: extracted files become attached
passages that share the window with retrieval (`Budget.attachment_share`), and
every file that did not make it, refused by the guard or dropped by the
packer, is named in a notice the model sees too.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from capsa.budget.pack import pack
from capsa.budget.packet import Budget, Packet, Passage
from capsa.budget.relevance import Scorer
from capsa.budget.tokens import Tokenizer, estimate_tokens
from capsa.guard.extract import Extracted, Omission

__all__ = ["AttachmentContext", "attachment_context", "attachment_passages"]


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
                       passages: Sequence[Passage] = (), tokenizer: Tokenizer | None = None,
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
    count = tokenizer or estimate_tokens
    attached = attachment_passages(extracted)
    problems = [f"{html.escape(o.label)}: {_reason(o)}" for o in omitted]
    notice = _notice(problems)
    room = budget.max_tokens - (count(notice) + 2 if notice else 0)
    packet = _pack(query, passages, attached, budget, room, tokenizer, scorer)
    dropped = {r.passage_id for r in packet.receipts if r.dropped is not None}
    late = [f"{html.escape(p.source or p.id)}: did not fit the context budget"
            for p in attached if p.id in dropped]
    if late:
        notice = _notice(problems + late)
        room = budget.max_tokens - (count(notice) + 2)
        packet = _pack(query, passages, attached, budget, room, tokenizer, scorer)
    text = _join(packet.render(), notice)
    while count(text) > budget.max_tokens and room > 1:  # rounding in the tokenizer
        room -= count(text) - budget.max_tokens
        packet = _pack(query, passages, attached, budget, room, tokenizer, scorer)
        text = _join(packet.render(), notice)
    return AttachmentContext(text=text, packet=packet, notice=notice, omitted=tuple(omitted))


def _pack(query: str, passages: Sequence[Passage], attached: Sequence[Passage], budget: Budget,
          room: int, tokenizer: Tokenizer | None, scorer: Scorer | None) -> Packet:
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
