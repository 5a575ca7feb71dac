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

unstructured reads one body part (`get_body`, HTML before plain). Every other
text part either says the body again or says something the body does not, and
mailers do not agree on which shape means which:

- The ordinary message (RFC 2046) is a ``multipart/alternative`` of
  ``text/plain`` and ``text/html``, the HTML often inside ``multipart/related``
  with its inline pictures (Gmail puts ``related`` around the alternative), in a
  ``multipart/mixed`` with the attachments. The branches of an alternative say
  the same thing, so only the branch holding the body is read; in an
  alternative elsewhere in the message, only the branch `get_body` would choose
  there.
- Apple Mail with a picture in the middle of an HTML message sends
  ``alternative[plain, mixed[html, picture, html]]``: the plain branch has the
  whole text, the HTML is cut into pieces around the picture (fixtures of Ruby's
  ``mail`` gem, issues of several mail readers that show only the first piece).
  The second piece is handed back as a file: no other part that reaches the
  context holds its words.
- Apple Mail in plain text with a picture sends ``mixed[plain, picture,
  plain]``; Exchange's MIME specification (MS-OXMIME, "aggregate body") joins
  such pieces for Apple mailers. Each later piece is handed back.
- Some Apple and iOS messages carry ``mixed[plain, related[html, pictures]]``,
  and broken mailers put plain and HTML side by side in ``mixed`` (Python's
  e-mail test message ``msg_15``: Outlook Express for Mac used one boundary for
  both the mixed and the alternative, so the alternative's parts land in the
  mixed). The plain part is then the body again, outside any alternative. A
  plain or HTML part that is not an attachment and whose words the body already
  holds (`capsa.guard.extractors._repeats`) is not handed back: it is reported
  in `MailParts.repeated`, which the extractor turns into a note on the
  message.
- Outlook and Exchange send a meeting request as ``alternative[plain, html,
  calendar]``, Google Calendar the same inside ``mixed`` with ``invite.ics``
  (iMIP, RFC 6047). A mail client shows the calendar branch as the message,
  and Outlook's HTML holds only the organizer's description: the title, time
  and place are in the calendar alone. So a ``text/calendar`` branch of the
  body's alternative is read (`capsa.guard.extractors._calendar`) into
  `MailParts.invitations`, which the extractor adds after the body as text,
  its description left out when the body already holds its words; one it
  cannot read (over `COMPARED_BYTES`, no event, past `MAX_CALENDARS`) is
  handed back as a file, and either way a note says so. Any other text in the
  body's alternative that is not a rendering of it (a vCard) is handed back.
- Mailman, when it cannot append its footer to the body, wraps the message in
  ``multipart/mixed`` and adds the footer as a ``text/plain`` part of its own
  (list.org's FAQ 4.39; Python's Mailman digest ``msg_02``). A footer is handed
  back even when a quoted reply in the body holds its words: it says a sliver
  of what the body says, where a second rendering says all of it.

Plain renderings spell out what HTML keeps in its tags: Gmail writes a link as
``text <url>`` and a picture as ``[image: alt]``, Outlook as ``text<url>`` and
``[cid:image001.png@...]``, so the comparison counts an HTML body's link
targets, sources and alternative texts among its words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser

from capsa.errors import IngestionRejected, RejectionReason
from capsa.guard.extractors._calendar import read_calendar
from capsa.guard.extractors._repeats import (
    COMPARED_BYTES,
    BodyWords,
    RepeatedPart,
    declared_text,
)
from capsa.guard.port import EmbeddedFile

__all__ = ["MAX_CALENDARS", "MAX_MIME_NESTING", "MAX_MIME_PARTS", "Invitation", "MailParts",
           "RepeatedPart", "quote_boundaries", "read_mail"]

MAX_MIME_PARTS = 1000
"""Parts in one message, embedded messages' parts included."""
MAX_MIME_NESTING = 20
"""Levels of multipart and embedded-message nesting in one message."""
_EMBEDDED_MESSAGES = frozenset({"message/rfc822", "message/global"})
_ENCRYPTED = frozenset({"multipart/encrypted", "application/pgp-encrypted"})
_SMIME = frozenset({"application/pkcs7-mime", "application/x-pkcs7-mime"})
_PGP_ARMOUR = b"-----BEGIN PGP MESSAGE-----"
_RENDERINGS = frozenset({"text/plain", "text/html"})
"""The text parts that can be another rendering of the body (what `get_body` chooses from)."""
_ALTERNATIVE_RENDERINGS = _RENDERINGS | {"text/enriched", "text/richtext", "text/watch-html",
                                         "text/x-amp-html"}
"""Text parts that, in a branch of the body's ``multipart/alternative``, render the body
again and nothing else: RFC 1896's enriched text, Apple Watch's HTML, Gmail's AMP HTML. Any
other text there is read or handed back, never skipped."""
_REPORT_FIELDS = frozenset({"message/delivery-status", "message/global-delivery-status",
                            "message/disposition-notification"})
"""Report parts made of header-field blocks: a bounce's status, a read receipt."""
_CALENDAR = "text/calendar"
MAX_CALENDARS = 5
"""Invitations in the body's alternative read as text per message; later ones are handed
back as files."""
_NOTE_CHARS = 280
"""A note's length, under the 300 characters the pool keeps of a worker's note."""


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
    repeated: tuple[RepeatedPart, ...] = ()
    """Text parts outside the body's ``multipart/alternative`` that were not handed back
    because the body already holds their words (see `repeated_note`)."""
    invitations: tuple[Invitation, ...] = ()
    """``text/calendar`` branches of the body's ``multipart/alternative``, read as text to
    follow the body (see `invitation_notes`)."""
    unread_calendars: tuple[tuple[str, str], ...] = ()
    """``text/calendar`` branches of the body's alternative handed back as files instead of
    read: each file's name and why."""
    mended: bytes | None = None
    """The message as the body's parser must read it, when it differs from the bytes
    given: a boundary quoted (`quote_boundaries`), a mislabelled text part relabelled."""
    relabelled: tuple[tuple[str, str], ...] = ()
    """Text parts whose bytes are not in the charset they declare but are UTF-8, read as
    UTF-8: each part's type and the charset it declared."""

    @property
    def charset_notes(self) -> tuple[str, ...]:
        """One note for the parts `relabelled`; empty when there were none.

        Examples:
            >>> MailParts((), 2, relabelled=(("text/plain", "iso-2022-jp"),)).charset_notes
            ('1 text part read as UTF-8: its bytes are UTF-8, not the charset it declares \
(text/plain, declared iso-2022-jp)',)
        """
        if not self.relabelled:
            return ()
        count = len(self.relabelled)
        listed = "; ".join(f"{ctype}, declared {charset}" for ctype, charset in self.relabelled)
        note = (f"{count} text part{'s' if count > 1 else ''} read as UTF-8: "
                f"{'their' if count > 1 else 'its'} bytes are UTF-8, not the charset "
                f"{'they declare' if count > 1 else 'it declares'} ({listed})")
        return (note if len(note) <= _NOTE_CHARS else note[: _NOTE_CHARS - 2] + "\u2026)",)

    @property
    def invitation_notes(self) -> tuple[str, ...]:
        """What became of the calendar branches of the body's alternative, one note each
        for those read and those handed back; empty when there were none.

        Examples:
            >>> MailParts((), 4, invitations=(Invitation("Invitation: Review", 812, 1, 1),)
            ...           ).invitation_notes
            ("1 invitation (text/calendar in the message body's alternative, 812 bytes) given \
as text after the body: each event's title, time, place, people and description; time zone \
rules, alarms and other properties left out; 1 description left out, the body already says \
it",)
        """
        notes: list[str] = []
        if self.invitations:
            count, size = len(self.invitations), sum(i.size for i in self.invitations)
            described = sum(i.descriptions_left_out for i in self.invitations)
            notes.append(
                f"{count} invitation{'s' if count > 1 else ''} (text/calendar in the message "
                f"body's alternative, {size} bytes) given as text after the body: each "
                "event's title, time, place, people and description; time zone rules, alarms "
                "and other properties left out"
                + (f"; {described} description{'s' if described > 1 else ''} left out, the "
                   f"body already says {'them' if described > 1 else 'it'}" if described else ""))
        if self.unread_calendars:
            named = "; ".join(f"{name}: {why}" for name, why in self.unread_calendars)
            head = (f"{len(self.unread_calendars)} text/calendar part"
                    f"{'s' if len(self.unread_calendars) > 1 else ''} in the message body's "
                    "alternative handed back as files, not read as invitations (")
            if len(head) + len(named) + 1 > _NOTE_CHARS:
                named = named[: _NOTE_CHARS - len(head) - 2] + "\u2026"
            notes.append(head + named + ")")
        return tuple(notes)

    @property
    def repeated_note(self) -> str | None:
        """The note that reports `repeated` on the message's result; None when it is empty.

        Examples:
            >>> MailParts((), 3, repeated=(RepeatedPart("text/plain", 412, 58, 57, False),)
            ...           ).repeated_note
            '1 text part not extracted separately: the message body already says what it \
says (text/plain, 412 bytes, 57 of 58 words in the body)'
        """
        if not self.repeated:
            return None
        count = len(self.repeated)
        head = (f"{count} text part{'s' if count > 1 else ''} not extracted separately: the "
                f"message body already says what {'they say' if count > 1 else 'it says'} (")
        listed: list[str] = []
        for part in self.repeated:
            more = count - len(listed) - 1
            longer = "; ".join([*listed, part.describe()])
            if listed and len(head) + len(longer) + len(f"; and {more} more)") > _NOTE_CHARS:
                break
            listed.append(part.describe())
        more = count - len(listed)
        return head + "; ".join(listed) + (f"; and {more} more)" if more else ")")


@dataclass(frozen=True, slots=True)
class Invitation:
    """A ``text/calendar`` branch of the body's alternative, as text."""

    text: str
    """Its events as labelled lines (``Invitation: ...``, ``When: ...``, ``Where: ...``)."""
    size: int
    """The part's decoded size in bytes."""
    events: int
    """Events rendered (at most `capsa.guard.extractors._calendar.MAX_EVENTS`)."""
    descriptions_left_out: int = 0
    """Event descriptions not rendered because the body already holds their words."""


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
    quoted = quote_boundaries(payload)
    try:
        message = BytesParser(policy=policy.default).parsebytes(quoted)
    except RecursionError:
        raise _refuse("nested_too_deep", "the message nests deeper than the e-mail parser "
                                         f"can follow (limit {max_nesting} levels)") from None
    parts = _count(message, max_parts=max_parts, max_nesting=max_nesting)
    relabelled = _relabel(message)
    mended = (message.as_bytes(policy=policy.default) if relabelled
              else quoted if quoted is not payload else None)
    body = message.get_body(_BODY_PREFERENCE) if isinstance(message, EmailMessage) else None
    shown, calendars = _shown_as_body(message, body)
    collected = _Collected()
    _collect(message, collected, shown=shown, calendars=calendars,
             body=BodyWords(body) if body is not None else None)
    return MailParts(embedded=tuple(collected.embedded), parts=parts,
                     unsplit=_unsplit_body(message), repeated=tuple(collected.repeated),
                     invitations=tuple(collected.invitations),
                     unread_calendars=tuple(collected.unread_calendars),
                     mended=mended, relabelled=relabelled)


_UNQUOTED_BOUNDARY = re.compile(rb'(?i)(\bboundary\s*=\s*)([^\s;"]*=[^\s;"]*)')
"""A boundary parameter written without quotes but holding ``=``, which RFC 2045 says
must be quoted and Outlook Express never quoted (``boundary=----=_NextPart_000``)."""
_CONTENT_TYPE_LINE = re.compile(rb"(?im)^content-type:[^\n]*(?:\r?\n[ \t][^\n]*)*")


def quote_boundaries(payload: bytes) -> bytes:
    """`payload` with every unquoted boundary that holds ``=`` quoted, in its header only.

    Python's e-mail parser ends an unquoted parameter at its first ``=``, so
    Outlook Express's ``boundary=----=_NextPart_000_0001`` reads as ``----``,
    no part is found, and the whole multipart source, headers, quoted-printable
    and HTML markup included, would be the body. Only ``Content-Type`` header
    lines (and their folded continuations) are touched, never body text; a
    message with no such boundary is returned as the same object.

    Examples:
        >>> quote_boundaries(b"Content-Type: multipart/alternative; boundary=----=_P_0\\n")
        b'Content-Type: multipart/alternative; boundary="----=_P_0"\\n'
        >>> quote_boundaries(b'Content-Type: multipart/mixed; boundary="a=b"\\n')
        b'Content-Type: multipart/mixed; boundary="a=b"\\n'
    """
    if _UNQUOTED_BOUNDARY.search(payload) is None:
        return payload
    quoted = _CONTENT_TYPE_LINE.sub(
        lambda line: _UNQUOTED_BOUNDARY.sub(rb'\1"\2"', line.group()), payload)
    return payload if quoted == payload else quoted


def _relabel(message: Message) -> tuple[tuple[str, str], ...]:
    """Relabel as UTF-8 each inline text part whose bytes fail its declared charset but
    are UTF-8 (a mail client's mislabel: UTF-8 sent as gb2312 or iso-2022-jp), so the body
    reads as written instead of as replacement characters; say which."""
    relabelled: list[tuple[str, str]] = []
    for part in message.walk():
        if (part.get_content_maintype() != "text" or part.is_multipart()
                or _is_attachment(part)):
            continue
        charset = part.get_content_charset()
        if charset is None or charset in ("utf-8", "us-ascii", "ascii"):
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or data.isascii():
            continue
        try:
            data.decode(charset)
            continue  # it reads as it says
        except (LookupError, UnicodeDecodeError):
            pass
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # neither: left to the declared charset's replacement characters
        part.set_param("charset", "utf-8")
        relabelled.append((part.get_content_type(), charset))
    return tuple(relabelled)


def _unsplit_body(message: Message) -> str | None:
    """The text of a message that says it is multipart but has no parts to split into."""
    if message.get_content_maintype() != "multipart" or message.is_multipart():
        return None
    data = message.get_payload(decode=True)
    if not isinstance(data, bytes) or not data.strip():
        return None
    return declared_text(data, message)


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


def _shown_as_body(message: Message, body: Message | None) -> tuple[set[int], set[int]]:
    """The ids of the parts whose text the message's own text already holds, or that only
    render another part's text; and the ids of the calendar branches of the body's own
    alternative.

    unstructured reads one body part. Inside a ``multipart/alternative`` the
    branches say the same thing, and a reader shows one of them: the branch
    holding the body, or, in an alternative elsewhere (a second
    plain-and-HTML pair after an inline picture), the branch holding the part
    `get_body` would choose there. The other branches' renderings are shown:
    in the body's alternative, its plain, HTML, enriched, Apple Watch and AMP
    renderings (`_ALTERNATIVE_RENDERINGS`); in an alternative elsewhere, only
    plain and HTML. An invitation's ``text/calendar`` branch in the body's
    alternative is what a mail client shows as the message (its title, time
    and place, which Outlook's HTML lacks), so it is read as text (the second
    set); anywhere else it is handed back, as is any other text a branch
    holds. Parts in
    the shown branch beside its chosen part are not: Apple Mail puts
    ``text/html``, picture, ``text/html`` in one ``multipart/mixed`` branch, and
    the second HTML piece is in no other part that reaches the context.
    """
    shown = {id(body)} if body is not None else set()
    calendars: set[int] = set()
    for part in message.walk():
        if part.get_content_type() != "multipart/alternative" or not isinstance(
                part, EmailMessage):
            continue
        holds_body = body is not None and _holds(part, body)
        chosen = body if holds_body else part.get_body(_BODY_PREFERENCE)
        if chosen is None:
            continue
        renderings = _ALTERNATIVE_RENDERINGS if holds_body else _RENDERINGS
        for branch in part.iter_parts():
            if _holds(branch, chosen):
                continue
            for inside in branch.walk():
                ctype = inside.get_content_type()
                if ctype in renderings:
                    shown.add(id(inside))
                elif holds_body and ctype == _CALENDAR:
                    calendars.add(id(inside))
    return shown, calendars


def _holds(tree: Message, target: Message) -> bool:
    return any(inside is target for inside in tree.walk())


@dataclass(slots=True)
class _Collected:
    embedded: list[EmbeddedFile] = field(default_factory=list)
    repeated: list[RepeatedPart] = field(default_factory=list)
    invitations: list[Invitation] = field(default_factory=list)
    unread_calendars: list[tuple[str, str]] = field(default_factory=list)


def _collect(message: Message, collected: _Collected, *, shown: set[int], calendars: set[int],
             body: BodyWords | None) -> None:
    """Collect every attachment, embedded message and text part the body does not show.

    Embedded messages are not descended into; a message whose own type is
    ``message/rfc822`` (a forward sent as the whole message, as GroupWise does)
    hands back the message it carries, since its body is that message. A
    plain or HTML part that is not an attachment and whose words the body
    already holds (`BodyWords.repeat`) goes to `repeated` instead: a second
    rendering of the body beside it, not a file of its own. A calendar branch of
    the body's alternative (`calendars`) becomes an `Invitation`, or a file
    with its reason when it cannot be read as one.
    """
    found = collected.embedded
    stack: list[Message] = [message]
    while stack:
        part = stack.pop()
        ctype = part.get_content_type()
        if ctype in _EMBEDDED_MESSAGES:
            found.append(_embedded_message(part, len(found)))
        elif ctype in _REPORT_FIELDS:
            found.append(_report_fields(part, ctype, len(found)))
        elif part.is_multipart():
            children = part.get_payload()
            if isinstance(children, list):
                stack.extend(reversed([c for c in children if isinstance(c, Message)]))
        elif part is not message and _is_attachment(part):
            found.append(_file(part, ctype, len(found)))
        elif part is not message and id(part) not in shown and _has_text(part):
            if id(part) in calendars and body is not None:
                why = _read_invitation(part, body, collected)
                if why is not None:
                    collected.unread_calendars.append((_name(part, len(found)), why))
                    found.append(_file(part, ctype, len(found)))
                continue
            repeat = body.repeat(part) if body is not None and ctype in _RENDERINGS else None
            if repeat is not None:
                collected.repeated.append(repeat)
            else:
                found.append(_file(part, ctype, len(found)))


def _read_invitation(part: Message, body: BodyWords, collected: _Collected) -> str | None:
    """Read `part` as an `Invitation` into `collected`; or say why it is handed back."""
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return "its content could not be decoded"
    if len(collected.invitations) >= MAX_CALENDARS:
        return f"more than {MAX_CALENDARS} in one message"
    if len(data) > COMPARED_BYTES:
        return f"{len(data)} bytes, over the {COMPARED_BYTES} read as an invitation"
    calendar = read_calendar(data, lambda unfolded: declared_text(unfolded, part))
    if calendar is None:
        return "no event in it that says what, when or where"

    def keep(description: str) -> bool:
        overlap = body.compare_text(description)
        return overlap is None or not overlap.held

    text, left_out = calendar.render(keep)
    collected.invitations.append(Invitation(text, len(data), len(calendar.events), left_out))
    return None


def _file(part: Message, ctype: str, number: int) -> EmbeddedFile:
    data = part.get_payload(decode=True)
    return EmbeddedFile(name=_name(part, number), media_type=ctype,
                        payload=data if isinstance(data, bytes) else b"")


def _report_fields(part: Message, ctype: str, number: int) -> EmbeddedFile:
    """A delivery report's status fields as a text file: what failed, for whom, and why.

    Python parses ``message/delivery-status`` as blocks of header fields with no
    body (``Final-Recipient``, ``Action``, ``Status: 5.1.1``, ``Diagnostic-Code``);
    walked as parts they hold nothing, and a bounce would lose what it reports.
    """
    blocks = part.get_payload()
    if isinstance(blocks, list):
        text = "\n".join(str(block) for block in blocks if isinstance(block, Message))
        data = text.encode("utf-8", "replace")
    else:
        raw = part.get_payload(decode=True)
        data = raw if isinstance(raw, bytes) else b""
    name = part.get_filename() or f"{ctype.split('/')[1]}-{number + 1}.txt"
    return EmbeddedFile(name=str(name), media_type="text/plain", payload=data)


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
        extension = {"text/plain": "txt", "text/html": "html",
                     _CALENDAR: "ics"}.get(part.get_content_type())
        if extension:
            return f"attachment-{number + 1}.{extension}"
    return f"attachment-{number + 1}"
