"""Outlook ``.msg`` messages: the body through unstructured, attachments back to the guard.

A ``.msg`` is an OLE compound file of MAPI property streams (MS-OXMSG). Its
directory is inspected under the file's limits before `python-oxmsg` (which
unstructured's ``msg`` extra installs) opens it, so no stream is read whose
size the file does not hold. The body is partitioned by unstructured's
``partition_msg`` (HTML body first, as Outlook shows it, through the same
depth-checked HTML parser as e-mail), and the sender, recipients, subject and
date head the text. Attachments are never parsed here: like an e-mail's, each
one's bytes go back to the guard, which runs it through the whole pipeline as
a file of its own, under the same shared allowance.
"""

from __future__ import annotations

import io
from typing import Any

from capsa.errors import IngestionRejected
from capsa.guard.archive import inspect_ole
from capsa.guard.extractors._floors import refuse as _refuse
from capsa.guard.limits import DEFAULT_LIMITS, ExtractionLimits
from capsa.guard.port import EmbeddedFile, Parsed

__all__ = ["OutlookExtractor"]

class OutlookExtractor:
    """Text of Outlook ``.msg`` messages; their attachments as embedded files.

    Args:
        limits: the bounds for the compound-file inspection; `with_limits`
            replaces them per call.
    """

    kinds = frozenset({"msg"})

    def __init__(self, limits: ExtractionLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits

    def with_limits(self, limits: ExtractionLimits) -> OutlookExtractor:
        """A copy that inspects the message under the call's `limits`."""
        return OutlookExtractor(limits)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Return the message's headers and body; its attachments as embedded files."""
        if kind != "msg":
            raise _refuse("unsupported_type", f"OutlookExtractor does not handle {kind}")
        inspect_ole(payload, self.limits, label="<payload>")
        try:
            message_type, partition_msg = _imports()
        except ImportError as exc:
            raise IngestionRejected(str(exc), label="<payload>", stage="parser",
                                    reason="missing_extra") from None
        try:
            message = message_type.load(payload)
            heads = _headers(message)
            elements = list(partition_msg(file=io.BytesIO(payload), process_attachments=False))
            embedded, notes = _attachments(message)
        except (KeyError, ValueError, AssertionError, OSError) as exc:  # oxmsg on a bad file
            raise _refuse("corrupt", f"{type(exc).__name__}: {exc}") from None
        from capsa.guard.elements import mail_from_wire
        from capsa.guard.extractors.unstructured import _element_text

        texts = (_element_text(e)[0] for e in elements)
        body = "\n\n".join(text for text in texts if text.strip())
        text = "\n".join(line for line, _ in heads) + ("\n\n" + body if body else "")
        mail = mail_from_wire({name: value for _, (name, value) in heads})
        return Parsed(text, embedded=embedded, notes=notes, mail=mail)

    def self_test(self) -> dict[str, str]:
        """Whether python-oxmsg and unstructured's ``msg`` partitioner are installed.

        No trusted ``.msg`` sample is built in (nothing on PyPI writes one), so
        this proves the imports only; the tests parse a generated message.
        """
        try:
            _imports()
        except ImportError as exc:
            return {"msg": f"missing_extra: {exc}"}
        return {"msg": "ok"}


def _imports() -> tuple[Any, Any]:
    try:
        from oxmsg import Message
        from unstructured.partition.msg import partition_msg

        from capsa.guard.extractors.unstructured import _guard_html_depth, _offline_spacy
    except ImportError as exc:
        raise ImportError("Outlook .msg needs: pip install 'capsa[unstructured]' "
                          "(python-oxmsg, through unstructured's msg extra)") from exc
    _offline_spacy()
    _guard_html_depth()
    return Message, partition_msg


def _headers(message: Any) -> list[tuple[str, tuple[str, object]]]:
    """Each header as its line of text and its field of `MailHeaders`."""
    lines: list[tuple[str, tuple[str, object]]] = []
    if message.sender:
        lines.append((f"From: {message.sender}", ("sent_from", [str(message.sender)])))
    recipients = [r.email_address for r in message.recipients if r.email_address]
    if recipients:
        lines.append((f"To: {', '.join(recipients)}", ("sent_to", recipients)))
    if message.subject:
        lines.append((f"Subject: {message.subject}", ("subject", message.subject)))
    if message.sent_date is not None:
        date = message.sent_date.isoformat()
        lines.append((f"Date: {date}", ("date", date)))
    return lines


def _attachments(message: Any) -> tuple[tuple[EmbeddedFile, ...], tuple[str, ...]]:
    """Attachments carried by value, as bytes; the rest named in a note."""
    embedded: list[EmbeddedFile] = []
    skipped: list[str] = []
    for number, attachment in enumerate(message.attachments, start=1):
        name = attachment.file_name or f"attachment-{number}"
        data = attachment.file_bytes if attachment.attached_by_value else None
        if not data:
            skipped.append(name)
            continue
        embedded.append(EmbeddedFile(name=name, media_type=attachment.mime_type,
                                     payload=bytes(data)))
    notes: tuple[str, ...] = ()
    if skipped:
        notes = (f"{len(skipped)} attachment(s) not carried in the message (a link or an "
                 f"embedded message, not extracted): {', '.join(skipped)[:300]}",)
    return tuple(embedded), notes

