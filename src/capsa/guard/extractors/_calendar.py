"""An invitation's ``text/calendar`` part as the few lines a reader of the message sees.

Outlook and Exchange send a meeting request as ``multipart/alternative`` of
``text/plain``, ``text/html`` and ``text/calendar; method=REQUEST`` (iMIP,
RFC 6047); Google Calendar sends the same alternative inside
``multipart/mixed`` with an ``invite.ics`` attachment. A mail client shows
the calendar branch as the message: a card with the title, the time, the place
and the organizer. The HTML branch is what unstructured reads, and Outlook's
holds only the organizer's description, so the time and the place are in the
calendar branch alone. `read_calendar` reads that branch (RFC 5545: lines
unfolded, text values unescaped) and renders each event as a few labelled
lines::

    Invitation: Berth allocation review
    When: 2024-05-14 14:00 to 15:00 (W. Europe Standard Time)
    Where: Room 3.12, Harbour House
    Organizer: Jonas Berg <jonas.berg@example.com>
    Attendees: Dana Reyes <dana@example.com> (accepted), ...

Raw iCalendar would reach a model with its lines folded every 75 bytes (a
word, even a UTF-8 sequence, cut in two), its time zone rules, and
Outlook's description of the body over again.

The reading is bounded and linear in the part's size: lines are unfolded by
one regular expression over the bytes, each line is split by a scan that
never goes back, at most `MAX_EVENTS` events and `MAX_ATTENDEES` attendees per
event are named (the rest are counted), and a component nesting that never
ends costs one counter. Anything that is not an event (a part with no
``VEVENT`` that says what or when) gives None, and the caller hands the part
back as a file instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta

__all__ = ["MAX_ATTENDEES", "MAX_EVENTS", "Calendar", "CalendarEvent", "read_calendar"]

MAX_EVENTS = 5
"""Events rendered from one part (a recurring meeting's exceptions are events of their
own); later ones are counted in a last line."""
MAX_ATTENDEES = 10
"""Attendees named per event; the rest are counted (a company-wide meeting lists
thousands)."""

_FOLD = re.compile(rb"\r?\n[ \t]")
"""A line break and the one space or tab that continue a folded line (RFC 5545 3.1)."""
_LINE_TOKENS = re.compile(r'"[^"]*"?|[^";:]+|[;:]')
"""A quoted parameter value (its end optional), a run of other characters, or a separator."""
_ESCAPED = re.compile(r"\\([nN,;\\])")
_DATE_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})\d{2}(Z?))?\Z")
_HEADINGS = {"REQUEST": "Invitation", "PUBLISH": "Event", "CANCEL": "Cancelled",
             "REPLY": "Reply", "COUNTER": "Proposed new time", "REFRESH": "Event",
             "DECLINECOUNTER": "Proposal declined", "ADD": "Event added"}
"""How a mail client titles the card, by the calendar's METHOD (RFC 5546)."""
_PARTSTAT = {"ACCEPTED": "accepted", "DECLINED": "declined", "TENTATIVE": "tentative",
             "DELEGATED": "delegated"}
_WANTED = frozenset({"SUMMARY", "DTSTART", "DTEND", "DURATION", "LOCATION", "ORGANIZER",
                     "ATTENDEE", "DESCRIPTION", "RRULE", "STATUS"})


@dataclass(slots=True)
class CalendarEvent:
    """One ``VEVENT``'s properties a reader needs, as text."""

    summary: str = ""
    start: str = ""
    end: str = ""
    duration: str = ""
    location: str = ""
    organizer: str = ""
    attendees: list[str] = field(default_factory=list)
    attendee_count: int = 0
    description: str = ""
    repeats: str = ""
    cancelled: bool = False

    @property
    def says_anything(self) -> bool:
        """Whether it holds what a reader would look for: what, when, where or why."""
        return bool(self.summary or self.start or self.location or self.description)

    def render(self, method: str, *, description: bool = True) -> str:
        """The event as labelled lines; `description` False leaves its description out."""
        heading = "Cancelled" if self.cancelled else _HEADINGS.get(method, "Event")
        lines = [f"{heading}: {self.summary or '(no title)'}"]
        if self.start:
            lines.append(f"When: {_span(self.start, self.end, self.duration)}")
        if self.repeats:
            lines.append(f"Repeats: {self.repeats}")
        if self.location:
            lines.append(f"Where: {self.location}")
        if self.organizer:
            lines.append(f"Organizer: {self.organizer}")
        if self.attendees:
            more = self.attendee_count - len(self.attendees)
            lines.append("Attendees: " + ", ".join(self.attendees)
                         + (f", and {more} more" if more else ""))
        if description and self.description:
            lines.append(f"Description: {self.description}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Calendar:
    """A calendar part's events and the method it was sent with."""

    method: str
    events: tuple[CalendarEvent, ...]
    more_events: int
    """Events past `MAX_EVENTS`, counted, not rendered."""

    def render(self, keep_description: Callable[[str], bool]) -> tuple[str, int]:
        """The events as text, and how many descriptions `keep_description` left out."""
        blocks: list[str] = []
        left_out = 0
        for event in self.events:
            keep = not event.description or keep_description(event.description)
            left_out += not keep
            blocks.append(event.render(self.method, description=keep))
        if self.more_events:
            blocks.append(f"and {self.more_events} more event"
                          f"{'s' if self.more_events > 1 else ''} in the same invitation")
        return "\n\n".join(blocks), left_out


def read_calendar(text: bytes, decode: Callable[[bytes], str]) -> Calendar | None:
    """The events of an iCalendar part (`decode` turns its unfolded bytes into text), or
    None when it holds no event that says what, when or where.

    Examples:
        >>> ics = (b"BEGIN:VCALENDAR\\r\\nMETHOD:REQUEST\\r\\nBEGIN:VEVENT\\r\\n"
        ...        b"SUMMARY:Berth review\\\\, north\\r\\n"
        ...        b"DTSTART;TZID=Europe/London:20240514T140000\\r\\n"
        ...        b"DTEND;TZID=Europe/London:20240514T150000\\r\\n"
        ...        b"LOCATION:Room 3.1\\r\\n 2\\r\\nEND:VEVENT\\r\\nEND:VCALENDAR\\r\\n")
        >>> print(read_calendar(ics, bytes.decode).render(lambda _: True)[0])
        Invitation: Berth review, north
        When: 2024-05-14 14:00 to 15:00 (Europe/London)
        Where: Room 3.12
    """
    lines = decode(_FOLD.sub(b"", text)).splitlines()
    method = ""
    events: list[CalendarEvent] = []
    more = 0
    depth = 0
    event_depth = 0  # the depth of the open VEVENT, 0 when none is open
    event: CalendarEvent | None = None
    for line in lines:
        parsed = _property(line)
        if parsed is None:
            continue
        name, params, value = parsed
        if name == "BEGIN":
            depth += 1
            if event_depth == 0 and value.strip().upper() == "VEVENT":
                event_depth = depth
                event = CalendarEvent()
        elif name == "END":
            if depth == event_depth and event is not None:
                if event.says_anything and len(events) < MAX_EVENTS:
                    events.append(event)
                elif event.says_anything:
                    more += 1
                event, event_depth = None, 0
            depth = max(0, depth - 1)
        elif name == "METHOD" and depth == 1:
            method = value.strip().upper()
        elif event is not None and depth == event_depth and name in _WANTED:
            _set(event, name, params, value)
    if event is not None and event.says_anything:  # never ended: the part was cut short
        if len(events) < MAX_EVENTS:
            events.append(event)
        else:
            more += 1
    if not events:
        return None
    return Calendar(method, tuple(events), more)


def _property(line: str) -> tuple[str, dict[str, str], str] | None:
    """A content line's name, parameters and value; None for a line that is none."""
    name = ""
    params: dict[str, str] = {}
    key = None
    for token in _LINE_TOKENS.finditer(line):
        piece = token.group()
        if piece == ":":
            return name.strip().upper(), params, line[token.end():]
        if piece == ";":
            key = None
        elif not name:
            name = piece
        elif key is None:
            key, _, rest = piece.partition("=")
            key = key.strip().upper()
            params[key] = rest
        else:
            params[key] += piece
    return None


def _set(event: CalendarEvent, name: str, params: dict[str, str], value: str) -> None:
    if name == "SUMMARY":
        event.summary = _text(value)
    elif name == "DTSTART":
        event.start = _when(value, params)
    elif name == "DTEND":
        event.end = _when(value, params)
    elif name == "DURATION":
        event.duration = value.strip()
    elif name == "LOCATION":
        event.location = _text(value)
    elif name == "ORGANIZER":
        event.organizer = _person(value, params)
    elif name == "ATTENDEE":
        event.attendee_count += 1
        if len(event.attendees) < MAX_ATTENDEES:
            status = _PARTSTAT.get(params.get("PARTSTAT", "").strip('"').upper())
            who = _person(value, params)
            event.attendees.append(f"{who} ({status})" if status else who)
    elif name == "DESCRIPTION":
        event.description = _text(value).strip()
    elif name == "RRULE":
        event.repeats = value.strip()
    elif name == "STATUS":
        event.cancelled = value.strip().upper() == "CANCELLED"


def _text(value: str) -> str:
    """A TEXT value unescaped: ``\\n`` is a line break, ``\\,`` a comma."""
    return _ESCAPED.sub(lambda m: "\n" if m.group(1) in "nN" else m.group(1), value).strip()


def _person(value: str, params: dict[str, str]) -> str:
    address = value.strip()
    if address.lower().startswith("mailto:"):
        address = address[len("mailto:"):]
    name = params.get("CN", "").strip().strip('"').strip()
    if name and address and name.lower() != address.lower():
        return f"{name} <{address}>"
    return name or address


def _when(value: str, params: dict[str, str]) -> str:
    """``2024-05-14 14:00 (Europe/London)``, ``2024-05-14 13:00 UTC`` or ``2024-05-14``; the
    value as written when it is none of RFC 5545's forms."""
    value = value.strip()
    found = _DATE_TIME.match(value)
    if found is None:
        return value
    year, month, day, hour, minute, utc = found.groups()
    when = f"{year}-{month}-{day}"
    if hour is not None:
        when += f" {hour}:{minute}" + (" UTC" if utc else "")
    zone = params.get("TZID", "").strip().strip('"')
    return f"{when} ({zone})" if zone and not utc else when


def _span(start: str, end: str, duration: str) -> str:
    """``2024-05-14 14:00 to 15:00 (Europe/London)``; a one-day event's day alone (its end
    is the next day: RFC 5545's end is not part of the event)."""
    if len(start) == len(end) == 10 and _next_day(start) == end:
        return start
    if end:
        same_day = start[:10] == end[:10] and len(end) > 10
        shown_end = end[11:] if same_day else end
        zone = f" ({start.split(' (', 1)[1]}" if same_day and " (" in start else ""
        if zone and shown_end.endswith(zone):
            start_shown = start[: -len(zone)]
            return f"{start_shown} to {shown_end[: -len(zone)]}{zone}"
        return f"{start} to {shown_end}"
    return f"{start}, for {duration}" if duration else start


def _next_day(day: str) -> str:
    try:
        return (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    except ValueError:
        return ""
