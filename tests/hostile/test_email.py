"""E: e-mail (E1–E8): nesting, attachment floods, hostile attachment names, renderings and
invitations beside the body.

capsa reads an e-mail's own text in the worker and hands each attachment back
as bytes; the parent runs it through the whole guard as a file of its own,
under a safe label. A poisoned or traversal-named attachment can neither be
written anywhere nor take the message's text down with it.
"""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from capsa.guard import Attachment, Extracted, IsolatedExtractor, Omission
from capsa.guard.samples import (
    OLE_MSG,
    TRAVERSAL_FILENAME,
    eml_attachments,
    eml_nested_multipart,
    eml_simple,
    eml_with_attachments,
    zip_ratio_bomb,
)

from .conftest import (
    PARSE_LIMITS,
    assert_omitted,
    good_for,
    run_among_good,
    run_set,
    scratch_files,
)


def _run_eml(pool: IsolatedExtractor, payload: bytes, label: str = "hostile.eml"
             ) -> Extracted | Omission:
    return run_among_good(pool, Attachment(label=label, payload=payload), PARSE_LIMITS,
                          good=[good_for("eml"), good_for("text")], next_file=good_for("eml"))


@pytest.mark.slow
def test_e1_deeply_nested_multipart_is_refused_before_the_recursion(
        real_pool: IsolatedExtractor) -> None:
    outcome = _run_eml(real_pool, eml_nested_multipart(2000))
    omission = assert_omitted(outcome, stage="preflight", reason="nested_too_deep")
    assert "limit 20 levels" in omission.detail


@pytest.mark.slow
def test_e2_attachment_flood_is_refused(real_pool: IsolatedExtractor) -> None:
    outcome = _run_eml(real_pool, eml_attachments(1001))
    omission = assert_omitted(outcome, stage="preflight", reason="too_many_members")
    assert "more than 1000 MIME parts" in omission.detail


@pytest.mark.slow
def test_e3_traversal_attachment_name_is_never_written(real_pool: IsolatedExtractor) -> None:
    message = eml_with_attachments("Northwind Harbor body text.",
                                   [(TRAVERSAL_FILENAME, "text/plain", b"* * * * * evil")])
    before = scratch_files(real_pool)
    outcome = _run_eml(real_pool, message, label="../../etc/cron.d/mail.eml")
    assert isinstance(outcome, Extracted)
    assert outcome.label == "mail.eml"
    assert "Northwind Harbor body text." in outcome.text
    assert "evil" not in outcome.text  # the attachment is a file of its own ...
    assert "- xtxt.exe (14 bytes, text/plain; extracted separately)" in outcome.text
    assert scratch_files(real_pool) == before


@pytest.mark.slow
def test_e4_poisoned_attachments_do_not_take_the_message_down(
        real_pool: IsolatedExtractor) -> None:
    message = eml_with_attachments("Northwind Harbor quarterly figures attached.", [
        ('filename="bomb.zip"', "application/zip", zip_ratio_bomb()),
        (TRAVERSAL_FILENAME, "text/plain", b"payload"),
        ('filename="fine.txt"', "text/plain", b"an ordinary attachment"),
    ])
    outcome = _run_eml(real_pool, message)
    assert isinstance(outcome, Extracted)
    assert "quarterly figures attached" in outcome.text


@pytest.mark.slow
def test_e4_one_poisoned_message_among_good_ones_leaves_them_included(
        real_pool: IsolatedExtractor) -> None:
    good = [Attachment(label=f"good-{i}.eml", payload=eml_simple(f"Harbor note number {i}."))
            for i in range(3)]
    poisoned = Attachment(label="poisoned.eml", payload=eml_nested_multipart(2000))
    run = run_set([good[0], poisoned, good[1], good[2]], real_pool, PARSE_LIMITS)
    assert [o.label for o in run.result.extracted] == ["good-0.eml", "good-1.eml", "good-2.eml"]
    assert [(o.label, o.reason) for o in run.result.omitted] == [
        ("poisoned.eml", "nested_too_deep")]
    assert [o.text for o in run.result.extracted] == [
        f"Harbor note number {i}." for i in range(3)]


@pytest.mark.slow
def test_e6_a_rendering_beside_the_body_crosses_the_worker_as_a_note_not_a_file(
        real_pool: IsolatedExtractor) -> None:
    """iOS Mail's ``mixed[plain, related[html, picture]]``, then a picture and a paragraph:
    the plain rendering is left out and said so (the note crosses the worker's reply); the
    paragraph is a file of its own."""
    words = ("Northwind Harbor berth schedule: the north berth opens on Monday at six, the "
             "south berth stays closed until the dredging ends in June.")
    related = EmailMessage()
    related.set_content(f"<div>{words}</div><div><img src='cid:plan' alt='berth plan'></div>",
                        subtype="html")
    related.add_related(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", cid="<plan>")
    message = EmailMessage()
    message["From"], message["Subject"] = "harbour@example.org", "Berths"
    message.make_mixed()
    for text, subtype in ((f"{words}\n\n[image: berth plan]\n", "plain"), ("", "related"),
                          ("The crane photo is below; its boom needs paint.", "plain")):
        if subtype == "related":
            message.attach(related)
            continue
        part = EmailMessage()
        part.set_content(text, subtype=subtype)
        message.attach(part)

    outcome = _run_eml(real_pool, bytes(message))

    assert isinstance(outcome, Extracted)
    assert outcome.text.count("the north berth opens on Monday") == 1
    assert any(note.startswith("1 text part not extracted separately: the message body "
                               "already says what it says (text/plain,") for note in outcome.notes)
    listed = outcome.text.split("Attached:\n", 1)[1].splitlines()  # extract_all lists children
    assert [line.split(" (")[0] for line in listed] == ["- attachment-1", "- attachment-2.txt"]
    assert listed[1].endswith("text/plain; extracted separately)")


@pytest.mark.slow
def test_e7_a_wrapped_cjk_rendering_beside_the_body_crosses_the_worker_as_a_note(
        real_pool: IsolatedExtractor) -> None:
    """Apple Mail's ``mixed[plain, related[html, picture]]`` in Chinese, the plain text
    wrapped every 19 characters: its lines cut the HTML's unspaced sentences elsewhere."""
    words = ("泊位分配评审会议改到星期四下午两点，在三楼十二号会议室举行。议程包括北泊位疏浚计划、"
             "四号起重机维护窗口以及五月份夜班人员安排。")
    related = EmailMessage()
    related.set_content(f"<div>{words}</div><div><img src='cid:plan' alt='泊位图'></div>",
                        subtype="html")
    related.add_related(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", cid="<plan>")
    message = EmailMessage()
    message["From"], message["Subject"] = "harbour@example.org", "泊位"
    message.make_mixed()
    plain = EmailMessage()
    plain.set_content("\n".join(words[i:i + 19] for i in range(0, len(words), 19)))
    message.attach(plain)
    message.attach(related)

    outcome = _run_eml(real_pool, bytes(message))

    assert isinstance(outcome, Extracted)
    assert outcome.text.count("四号起重机维护窗口") == 1
    assert any(note.startswith("1 text part not extracted separately") for note in outcome.notes)


def _invitation(ics: bytes) -> bytes:
    body = "The berth allocation review moves to Thursday; agenda on the ops site."
    message = EmailMessage()
    message["From"], message["Subject"] = "jonas.berg@example.com", "Berth allocation review"
    message.set_content(body)
    message.add_alternative(f"<p>{body}</p>", subtype="html")
    message.add_alternative(ics, maintype="text", subtype="calendar",
                            params={"method": "REQUEST"})
    return bytes(message)


@pytest.mark.slow
def test_e8_an_invitation_in_the_body_alternative_crosses_the_worker_as_text(
        real_pool: IsolatedExtractor) -> None:
    ics = (b"BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nSUMMARY:Berth allocation "
           b"review\r\nDTSTART;TZID=Europe/Amsterdam:20240516T140000\r\nLOCATION:Room 3.1\r\n"
           b" 2\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")

    outcome = _run_eml(real_pool, _invitation(ics))

    assert isinstance(outcome, Extracted)
    assert outcome.text.endswith("Invitation: Berth allocation review\n"
                                 "When: 2024-05-16 14:00 (Europe/Amsterdam)\nWhere: Room 3.12")
    assert any(note.startswith("1 invitation (text/calendar") for note in outcome.notes)


@pytest.mark.slow
def test_e8_an_unreadable_invitation_comes_back_as_a_file_with_its_reason(
        real_pool: IsolatedExtractor) -> None:
    """Folded 60,000 times, with no event in it: not read as an invitation,
    handed back to the guard as a file, and the message says why."""
    ics = b"BEGIN:VCALENDAR\r\nX-JUNK:" + b"\r\n x" * 60_000 + b"\r\nEND:VCALENDAR\r\n"

    outcome = _run_eml(real_pool, _invitation(ics))

    assert isinstance(outcome, Extracted)
    assert "- attachment-1.ics (" in outcome.text
    assert any("handed back as files, not read as invitations (attachment-1.ics: no event"
               in note for note in outcome.notes)


def test_e5_a_malformed_outlook_msg_is_refused_before_any_parser(
        plain_pool: IsolatedExtractor) -> None:
    # .msg is a supported kind now (tests/hostile/test_office.py parses real ones); a
    # compound-file header no writer produces is refused by the OLE scan, unparsed.
    outcome = run_among_good(plain_pool, Attachment(label="invoice.msg",
                                                    media_type="application/vnd.ms-outlook",
                                                    payload=OLE_MSG))
    omission = assert_omitted(outcome, stage="archive", reason="corrupt")
    assert "OLE header" in omission.detail
