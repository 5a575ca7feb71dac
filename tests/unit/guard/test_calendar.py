"""capsa.guard.extractors._calendar: an invitation's iCalendar as the lines a reader sees."""

from __future__ import annotations

import pytest

from capsa.guard.extractors._calendar import MAX_ATTENDEES, MAX_EVENTS, read_calendar


def _ics(*event_lines: str, method: str = "REQUEST", extra: str = "") -> bytes:
    lines = ["BEGIN:VCALENDAR", "PRODID:-//Test//EN", "VERSION:2.0", f"METHOD:{method}",
             extra, "BEGIN:VEVENT", *event_lines, "END:VEVENT", "END:VCALENDAR"]
    return "\r\n".join(line for line in lines if line).encode() + b"\r\n"


def _render(data: bytes, *, keep: bool = True) -> str:
    calendar = read_calendar(data, lambda raw: raw.decode("utf-8", "replace"))
    assert calendar is not None
    return calendar.render(lambda _: keep)[0]


def test_read_calendar_renders_title_time_place_and_people() -> None:
    text = _render(_ics(
        'ORGANIZER;CN="Berg, Jonas":mailto:jonas.berg@example.com',
        "ATTENDEE;PARTSTAT=ACCEPTED;CN=Dana Reyes:mailto:dana@example.com",
        "ATTENDEE;PARTSTAT=NEEDS-ACTION:mailto:ops@example.com",
        "SUMMARY;LANGUAGE=en-US:Berth allocation review",
        "DTSTART;TZID=W. Europe Standard Time:20240516T140000",
        "DTEND;TZID=W. Europe Standard Time:20240516T150000",
        "LOCATION:Room 3.12\\, Harbour House", "RRULE:FREQ=WEEKLY;BYDAY=TH"))

    assert text == ("Invitation: Berth allocation review\n"
                    "When: 2024-05-16 14:00 to 15:00 (W. Europe Standard Time)\n"
                    "Repeats: FREQ=WEEKLY;BYDAY=TH\n"
                    "Where: Room 3.12, Harbour House\n"
                    "Organizer: Berg, Jonas <jonas.berg@example.com>\n"
                    "Attendees: Dana Reyes <dana@example.com> (accepted), ops@example.com")


def test_read_calendar_joins_folded_lines_before_decoding_so_a_cut_character_survives() -> None:
    """RFC 5545 folds at 75 bytes; a folder that counts bytes cuts a UTF-8 sequence."""
    summary = "SUMMARY:泊位分配评审会议".encode()
    folded = summary[:13] + b"\r\n " + summary[13:]  # inside the second ideograph
    data = _ics("DTSTART:20240516T120000Z").replace(b"BEGIN:VEVENT\r\n",
                                                     b"BEGIN:VEVENT\r\n" + folded + b"\r\n")

    assert _render(data).splitlines()[0] == "Invitation: 泊位分配评审会议"


def test_read_calendar_unescapes_a_description_and_can_leave_it_out() -> None:
    data = _ics("SUMMARY:Review", "DESCRIPTION:Agenda:\\n1. dredging\\; 2. cranes\\\\night")

    assert _render(data).endswith("Description: Agenda:\n1. dredging; 2. cranes\\night")
    assert "Description" not in _render(data, keep=False)


@pytest.mark.parametrize(("start", "end", "when"), [
    ("DTSTART;VALUE=DATE:20240516", "DTEND;VALUE=DATE:20240517", "2024-05-16"),
    ("DTSTART;VALUE=DATE:20240516", "DTEND;VALUE=DATE:20240519", "2024-05-16 to 2024-05-19"),
    ("DTSTART:20240516T120000Z", "DTEND:20240516T130000Z", "2024-05-16 12:00 UTC to 13:00 UTC"),
    ("DTSTART:20240516T120000Z", "DURATION:PT1H30M", "2024-05-16 12:00 UTC, for PT1H30M"),
    ("DTSTART:next thursday", "", "next thursday"),
], ids=["all-day", "days", "utc", "duration", "not-a-date"])
def test_read_calendar_says_when_in_each_of_rfc_5545s_forms(start: str, end: str,
                                                             when: str) -> None:
    assert f"When: {when}\n" in _render(_ics("SUMMARY:x", start, end)) + "\n"


@pytest.mark.parametrize(("method", "status", "heading"), [
    ("REQUEST", "", "Invitation"), ("CANCEL", "STATUS:CANCELLED", "Cancelled"),
    ("REQUEST", "STATUS:CANCELLED", "Cancelled"), ("REPLY", "", "Reply"),
    ("PUBLISH", "", "Event"), ("X-UNKNOWN", "", "Event"),
])
def test_read_calendar_titles_the_event_by_its_method(method: str, status: str,
                                                       heading: str) -> None:
    text = _render(_ics("SUMMARY:Review", status, method=method))

    assert text.startswith(f"{heading}: Review")


def test_read_calendar_takes_no_property_of_an_alarm_or_a_time_zone() -> None:
    data = _ics("SUMMARY:Review", "BEGIN:VALARM", "DESCRIPTION:REMINDER", "ACTION:DISPLAY",
                "END:VALARM",
                extra="BEGIN:VTIMEZONE\r\nTZID:X\r\nBEGIN:STANDARD\r\nDTSTART:16010101T030000"
                      "\r\nEND:STANDARD\r\nEND:VTIMEZONE")

    assert _render(data) == "Invitation: Review"


def test_read_calendar_names_some_attendees_and_counts_the_rest() -> None:
    data = _ics("SUMMARY:All hands", *(f"ATTENDEE:mailto:p{i}@example.com" for i in range(250)))

    attendees = _render(data).splitlines()[-1]

    assert attendees.count("@example.com") == MAX_ATTENDEES
    assert attendees.endswith(f", and {250 - MAX_ATTENDEES} more")


def test_read_calendar_renders_some_events_and_counts_the_rest() -> None:
    events = "\r\n".join(f"BEGIN:VEVENT\r\nSUMMARY:Shift {i}\r\nEND:VEVENT" for i in range(40))
    data = f"BEGIN:VCALENDAR\r\nMETHOD:PUBLISH\r\n{events}\r\nEND:VCALENDAR\r\n".encode()

    text = _render(data)

    assert text.count("Event: Shift") == MAX_EVENTS
    assert text.endswith(f"and {40 - MAX_EVENTS} more events in the same invitation")


@pytest.mark.parametrize("data", [
    b"", b"BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n", b"\x00\xff" * 100,
    b"BEGIN:VCALENDAR\r\nBEGIN:VTODO\r\nSUMMARY:Buy rope\r\nEND:VTODO\r\nEND:VCALENDAR\r\n",
    b"BEGIN:VEVENT\r\nUID:1\r\nDTSTAMP:20240101T000000Z\r\nEND:VEVENT\r\n",
    b"just a line of text\nand another one", b'SUMMARY;CN="never closed:Review\r\n',
], ids=["empty", "no-event", "binary", "only-a-task", "an-event-that-says-nothing", "prose",
        "open-quote"])
def test_read_calendar_finds_no_invitation_in_what_holds_no_event(data: bytes) -> None:
    assert read_calendar(data, lambda raw: raw.decode("utf-8", "replace")) is None


def test_read_calendar_reads_an_event_never_ended_nor_nested_in_a_calendar() -> None:
    """A cut-short part leaves its event open, and a broken writer nests one event in
    another; what the outer event said is still what it said, and the inner is not it."""
    data = b"BEGIN:VEVENT\r\nSUMMARY:Review\r\nBEGIN:VEVENT\r\nSUMMARY:Inner\r\nEND:VEVENT\r\n"

    assert _render(data) == _render(data + b"END:VEVENT\r\n") == "Event: Review"
