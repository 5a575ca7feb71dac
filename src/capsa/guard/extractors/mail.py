"""E-mail structure: limits counted on the parsed message, attachments handed back.

The checks run on the tree the standard library's e-mail parser builds (the
same parser unstructured uses), so they count exactly what the parser sees:
bare-CR line ends, RFC 2231 continued boundaries (``boundary*0=``),
``message/global``, parts without a Content-Type. The parser recurses once
per nesting level; past Python's recursion limit (about 965 levels) it
raises `RecursionError`, which is refused as ``nested_too_deep`` like any
nesting over the limit.

Attachments and embedded messages are never parsed here: their bytes go back
to the guard, which runs each through the whole pipeline as a file of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser

from capsa.errors import IngestionRejected, RejectionReason
from capsa.guard.port import EmbeddedFile

__all__ = ["MAX_MIME_NESTING", "MAX_MIME_PARTS", "MailParts", "read_mail"]

MAX_MIME_PARTS = 1000
"""Parts in one message, embedded messages' parts included."""
MAX_MIME_NESTING = 20
"""Levels of multipart and embedded-message nesting in one message."""
_EMBEDDED_MESSAGES = frozenset({"message/rfc822", "message/global"})
_ENCRYPTED = frozenset({"multipart/encrypted", "application/pgp-encrypted"})
_SMIME = frozenset({"application/pkcs7-mime", "application/x-pkcs7-mime"})
_PGP_ARMOUR = b"-----BEGIN PGP MESSAGE-----"


@dataclass(frozen=True, slots=True)
class MailParts:
    """What the guard needs from a message besides its body text."""

    embedded: tuple[EmbeddedFile, ...]
    """Attachments and embedded messages, in order, as bytes for the guard."""
    parts: int
    """Parts counted, the message itself included."""
    unsplit: str | None = None
    """The body of a multipart message whose boundary is missing or never used, as text:
    the e-mail parser leaves such a body whole and unstructured reads none of it."""


def _refuse(reason: RejectionReason, detail: str) -> IngestionRejected:
    return IngestionRejected(detail, label="<payload>", stage="preflight", reason=reason)


def read_mail(payload: bytes, *, max_parts: int = MAX_MIME_PARTS,
              max_nesting: int = MAX_MIME_NESTING) -> MailParts:
    """Parse `payload`, check its shape, and return its attachments and embedded messages.

    Raises:
        IngestionRejected: ``nested_too_deep`` or ``too_many_members`` over
            the limits; ``encrypted`` for a PGP or S/MIME encrypted body.

    Examples:
        >>> mail = (b"From: a@x\\nTo: b@x\\nMIME-Version: 1.0\\n"
        ...         b'Content-Type: multipart/mixed; boundary="b"\\n\\n--b\\n'
        ...         b"Content-Type: text/plain\\n\\nhello\\n--b\\n"
        ...         b'Content-Type: text/plain; name="n.txt"\\n'
        ...         b'Content-Disposition: attachment; filename="n.txt"\\n\\nnote\\n--b--\\n')
        >>> [(f.name, f.payload) for f in read_mail(mail).embedded]
        [('n.txt', b'note')]
    """
    try:
        message = BytesParser(policy=policy.default).parsebytes(payload)
    except RecursionError:
        raise _refuse("nested_too_deep", "the message nests deeper than the e-mail parser "
                                         f"can follow (limit {max_nesting} levels)") from None
    parts = _count(message, max_parts=max_parts, max_nesting=max_nesting)
    embedded: list[EmbeddedFile] = []
    _collect(message, embedded, shown=_shown_as_body(message))
    return MailParts(embedded=tuple(embedded), parts=parts, unsplit=_unsplit_body(message))


def _unsplit_body(message: Message) -> str | None:
    """The text of a message that says it is multipart but has no parts to split into."""
    if message.get_content_maintype() != "multipart" or message.is_multipart():
        return None
    data = message.get_payload(decode=True)
    if not isinstance(data, bytes) or not data.strip():
        return None
    try:
        return data.decode(message.get_content_charset() or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", "replace")


def _count(message: Message, *, max_parts: int, max_nesting: int) -> int:
    """Walk every part, embedded messages included, without recursion."""
    parts = 0
    stack: list[tuple[Message, int]] = [(message, 0)]
    while stack:
        part, depth = stack.pop()
        parts += 1
        if parts > max_parts:
            raise _refuse("too_many_members",
                          f"more than {max_parts} MIME parts, over the limit of {max_parts}")
        if depth > max_nesting:
            raise _refuse("nested_too_deep", f"MIME parts nested {depth} levels deep, over "
                                             f"the limit of {max_nesting}")
        _refuse_if_encrypted(part)
        children = part.get_payload() if part.is_multipart() else None
        if isinstance(children, list):
            stack.extend((child, depth + 1) for child in children if isinstance(child, Message))
    return parts


def _refuse_if_encrypted(part: Message) -> None:
    ctype = part.get_content_type()
    if ctype in _ENCRYPTED:
        raise _refuse("encrypted", f"the message is PGP/MIME encrypted ({ctype})")
    if ctype in _SMIME and str(part.get_param("smime-type", "enveloped-data")).lower() in (
            "enveloped-data", "authenveloped-data"):
        raise _refuse("encrypted", f"the message is S/MIME encrypted ({ctype})")
    if part.get_content_maintype() == "text" and not part.is_multipart():
        body = part.get_payload(decode=True)
        if isinstance(body, bytes) and body.lstrip()[: len(_PGP_ARMOUR)] == _PGP_ARMOUR:
            raise _refuse("encrypted", "the message body is PGP encrypted (an armoured "
                                       "PGP MESSAGE block)")


_BODY_PREFERENCE = ("html", "plain")
"""The body unstructured's `partition_email` reads, as capsa calls it (its default
``content_source="text/html"``): `EmailMessage.get_body` with this preference."""


def _shown_as_body(message: Message) -> set[int]:
    """The ids of the parts whose text the message's own text already holds.

    unstructured reads one body part; its alternatives (the plain text beside
    an HTML body, inside the same ``multipart/alternative``) say the same thing.
    Every other text part (a second ``text/plain`` after an inline picture, a
    mailing list's footer, ``text/calendar``) is in neither, so `_collect`
    hands it back as a file of its own instead of dropping it.
    """
    body = message.get_body(_BODY_PREFERENCE) if isinstance(message, EmailMessage) else None
    if body is None:
        return set()
    shown = {id(body)}
    for part in message.walk():
        if part.get_content_type() == "multipart/alternative":
            inside = list(part.walk())
            if any(candidate is body for candidate in inside):
                shown.update(id(candidate) for candidate in inside)
    return shown


def _collect(message: Message, found: list[EmbeddedFile], *, shown: set[int]) -> None:
    """Append every attachment, embedded message and text part the body does not show.

    Embedded messages are not descended into; a message whose own type is
    ``message/rfc822`` (a forward sent as the whole message, as GroupWise does)
    hands back the message it carries, since its body is that message.
    """
    stack: list[Message] = [message]
    while stack:
        part = stack.pop()
        ctype = part.get_content_type()
        if ctype in _EMBEDDED_MESSAGES:
            found.append(_embedded_message(part, len(found)))
        elif part.is_multipart():
            children = part.get_payload()
            if isinstance(children, list):
                stack.extend(reversed([c for c in children if isinstance(c, Message)]))
        elif part is not message and (_is_attachment(part) or (
                id(part) not in shown and _has_text(part))):
            data = part.get_payload(decode=True)
            found.append(EmbeddedFile(name=_name(part, len(found)), media_type=ctype,
                                      payload=data if isinstance(data, bytes) else b""))


def _has_text(part: Message) -> bool:
    """A leaf that holds more than blank lines (an empty text part is not worth a file)."""
    data = part.get_payload(decode=True)
    return isinstance(data, bytes) and bool(data.strip())


def _is_attachment(part: Message) -> bool:
    """A named or attached part, or anything that is not body text."""
    return (part.get_content_disposition() == "attachment" or part.get_filename() is not None
            or part.get_content_maintype() not in ("text", "multipart", "message"))


def _embedded_message(part: Message, number: int) -> EmbeddedFile:
    inner = part.get_payload()
    if isinstance(inner, list) and inner and isinstance(inner[0], Message):
        data = inner[0].as_bytes(policy=policy.default.clone(linesep="\n"))
        subject = inner[0].get("subject")
    else:  # an unparsed body (e.g. a broken header block)
        raw = part.get_payload(decode=True)
        data = raw if isinstance(raw, bytes) else b""
        subject = None
    name = part.get_filename() or (f"{subject}.eml" if subject else f"message-{number + 1}.eml")
    return EmbeddedFile(name=str(name), media_type="message/rfc822", payload=data)


def _name(part: Message, number: int) -> str:
    name = part.get_filename()
    if name:
        return str(name)
    if isinstance(part, EmailMessage):
        extension = {"text/plain": "txt", "text/html": "html"}.get(part.get_content_type())
        if extension:
            return f"attachment-{number + 1}.{extension}"
    return f"attachment-{number + 1}"
