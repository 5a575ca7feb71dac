"""capsa.guard.extractors.mail: limits on the parsed message, attachments handed back."""

from __future__ import annotations

import re
import unicodedata
from email.message import EmailMessage

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, Extracted, Omission, extract_all, extract_attachment
from capsa.guard.extractors import PlainTextExtractor, Router, UnstructuredExtractor
from capsa.guard.extractors._repeats import BUDGET_BYTES, COMPARED_BYTES
from capsa.guard.extractors.mail import MAX_CALENDARS, MailParts, RepeatedPart, read_mail
from capsa.guard.limits import INGESTION_LIMITS

pytestmark = pytest.mark.slow


def _mail(body: str = "The report is attached.") -> EmailMessage:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "a@example.com", "b@example.com", "Report"
    mail.set_content(body + "\n")
    return mail


def _router() -> Router:
    return Router([PlainTextExtractor(), UnstructuredExtractor()])


def test_read_mail_returns_attachments_in_order_with_their_bytes() -> None:
    mail = _mail()
    mail.add_attachment(b"first note", maintype="text", subtype="plain", filename="a.txt")
    mail.add_attachment(b"%PDF-1.4 not really", maintype="application", subtype="pdf",
                        filename="b.pdf")

    found = read_mail(bytes(mail)).embedded

    assert [(f.name, f.media_type, f.payload) for f in found] == [
        ("a.txt", "text/plain", b"first note"),
        ("b.pdf", "application/pdf", b"%PDF-1.4 not really")]


def test_read_mail_hands_back_an_embedded_message_whole() -> None:
    inner = _mail("Forwarded words.")
    outer = _mail()
    outer.add_attachment(inner)

    (found,) = read_mail(bytes(outer)).embedded

    assert (found.name, found.media_type) == ("Report.eml", "message/rfc822")
    assert b"Forwarded words." in found.payload


def test_read_mail_treats_message_global_as_an_embedded_message() -> None:
    payload = (b'From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; '
               b'boundary="b"\n\n--b\nContent-Type: text/plain\n\nouter\n--b\n'
               b"Content-Type: message/global\n\nFrom: c@x\nSubject: Inner\n\ninner words\n"
               b"--b--\n")

    (found,) = read_mail(payload).embedded

    assert (found.name, found.media_type) == ("Inner.eml", "message/rfc822")
    assert b"inner words" in found.payload


def test_read_mail_refuses_a_pgp_mime_message_as_encrypted() -> None:
    payload = (b'From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: multipart/encrypted; '
               b'protocol="application/pgp-encrypted"; boundary="b"\n\n--b\n'
               b"Content-Type: application/pgp-encrypted\n\nVersion: 1\n--b\n"
               b"Content-Type: application/octet-stream\n\n-----BEGIN PGP MESSAGE-----\nx\n"
               b"-----END PGP MESSAGE-----\n--b--\n")

    with pytest.raises(IngestionRejected) as caught:
        read_mail(payload)

    assert caught.value.reason == "encrypted"


def test_read_mail_refuses_an_inline_pgp_body_as_encrypted() -> None:
    payload = bytes(_mail("-----BEGIN PGP MESSAGE-----\n\nhQEMA\n-----END PGP MESSAGE-----"))

    with pytest.raises(IngestionRejected) as caught:
        read_mail(payload)

    assert caught.value.reason == "encrypted"


def test_read_mail_refuses_an_smime_enveloped_message_as_encrypted() -> None:
    payload = (b"From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: application/pkcs7-mime;"
               b' smime-type=enveloped-data; name="smime.p7m"\n'
               b"Content-Transfer-Encoding: base64\n\nMIAGCSqGSIb3DQEHA6CAMIACAQAx\n")

    with pytest.raises(IngestionRejected) as caught:
        read_mail(payload)

    assert caught.value.reason == "encrypted"


def test_read_mail_accepts_a_signed_message() -> None:
    payload = (b'From: a@x\nTo: b@x\nMIME-Version: 1.0\nContent-Type: multipart/signed; '
               b'protocol="application/pgp-signature"; boundary="b"\n\n--b\n'
               b"Content-Type: text/plain\n\nsigned words\n--b\n"
               b"Content-Type: application/pgp-signature\n\n-----BEGIN PGP SIGNATURE-----\n"
               b"--b--\n")

    assert [f.media_type for f in read_mail(payload).embedded] == ["application/pgp-signature"]


def test_extract_attachment_extracts_each_mail_attachment_through_the_guard() -> None:
    mail = _mail()
    mail.add_attachment(b"invoice total 42", maintype="text", subtype="plain",
                        filename="../../invoice.txt")
    mail.add_attachment(b"\x89PNG\r\n\x1a\n", maintype="application", subtype="pdf",
                        filename="fake.pdf")

    item = extract_attachment(Attachment(label="mail.eml", payload=bytes(mail)), _router())

    invoice, fake = item.attachments
    assert isinstance(invoice, Extracted) and isinstance(fake, Omission)
    assert (invoice.label, invoice.parent, invoice.text) == (
        "mail.eml/invoice.txt", "mail.eml", "invoice total 42")
    assert (fake.label, fake.stage, fake.reason) == ("mail.eml/fake.pdf", "sniff",
                                                     "type_mismatch")
    assert "- invoice.txt (16 bytes, text/plain; extracted separately)" in item.text
    assert "- fake.pdf (8 bytes, application/pdf; not extracted: type_mismatch)" in item.text


def test_extract_attachment_refuses_attachments_nested_past_the_limit() -> None:
    inner = _mail("Forwarded.")
    inner.add_attachment(b"deep note", maintype="text", subtype="plain", filename="n.txt")
    outer = _mail()
    outer.add_attachment(inner)

    item = extract_attachment(Attachment(label="m.eml", payload=bytes(outer)), _router())

    (forwarded,) = item.attachments
    assert isinstance(forwarded, Extracted)
    (note,) = forwarded.attachments
    assert isinstance(note, Omission)
    assert (note.label, note.reason) == ("m.eml/Report.eml/n.txt", "nested_too_deep")
    assert "over the limit of 1 (max_nesting_depth)" in note.detail


def test_extract_all_lists_attachments_after_their_parent_under_the_set_ceiling() -> None:
    mail = _mail()
    mail.add_attachment(b"x" * 30, maintype="text", subtype="plain", filename="big.txt")
    limits = INGESTION_LIMITS.model_copy(update={"max_total_chars": 200})

    result = extract_all([Attachment(label="m.eml", payload=bytes(mail))], _router(), limits)

    assert [f.label for f in result.extracted] == ["m.eml", "m.eml/big.txt"]
    assert result.extracted[0].attachments == ()
    tight = limits.model_copy(update={"max_total_chars": len(result.extracted[0].text) + 5})
    squeezed = extract_all([Attachment(label="m.eml", payload=bytes(mail))], _router(), tight)
    assert [(o.label, o.reason) for o in squeezed.omitted] == [("m.eml/big.txt", "set_ceiling")]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_extract_attachment_reads_a_utf16_mail_as_a_message_not_its_source(
        encoding: str) -> None:
    payload = bytes(_mail("Wide body text.")).decode().encode(encoding)

    item = extract_attachment(Attachment(label="wide.eml", payload=payload), _router())

    assert item.kind == "eml"
    assert item.text == "Wide body text."


# --- text parts that say the body again ---------------------------------------------

BODY_HTML = ("<div>Hi Dana,</div><div>Please find the <a href='https://billing.example.com/"
             "inv/117'>invoice for March</a> below. The total is <b>4,180.00 EUR</b>, due on "
             "30 April.</div><div><img src='cid:image001.png@01DA2B3C' alt='Company logo'>"
             "</div><div>If anything looks wrong, call me on +44 20 7946 0123.</div>"
             "<div>Best regards,<br>Marta Kowalska<br>Accounts, Northwind Harbour</div>")
BODY_PLAIN = ("Hi Dana,\n\nPlease find the invoice for March\n<https://billing.example.com/inv/117>"
              " below. The total is *4,180.00 EUR*, due on 30 April.\n\n[image: Company logo]"
              "\nIf anything looks wrong, call me on +44 20 7946 0123.\n\nBest regards,\n"
              "Marta Kowalska\nAccounts, Northwind Harbour\n")
"""One message rendered twice, the plain one as Gmail writes links and pictures."""


def _text_part(text: str, subtype: str = "plain", **params: str) -> EmailMessage:
    part = EmailMessage()
    part.set_content(text, subtype=subtype, **params)  # type: ignore[arg-type]
    return part


def _mixed(*parts: EmailMessage) -> bytes:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "a@example.com", "b@example.com", "Invoice"
    mail.make_mixed()
    for part in parts:
        mail.attach(part)
    return bytes(mail)


def _picture() -> EmailMessage:
    picture = EmailMessage()
    picture.set_content(b"\x89PNG\r\n\x1a\nnot really", maintype="image", subtype="png",
                        disposition="inline")
    return picture


@pytest.mark.parametrize("html_first", [True, False], ids=["html-plain", "plain-html"])
def test_read_mail_leaves_out_a_plain_part_beside_the_html_body_that_says_the_same(
        html_first: bool) -> None:
    html, plain = _text_part(BODY_HTML, "html"), _text_part(BODY_PLAIN)

    mail = read_mail(_mixed(*((html, plain) if html_first else (plain, html))))

    assert mail.embedded == ()
    (repeated,) = mail.repeated
    # every word but "image", from Gmail's "[image: Company logo]"
    assert (repeated.media_type, repeated.found, repeated.words) == ("text/plain", 44, 45)


def test_read_mail_leaves_out_a_plain_part_beside_a_related_html_body() -> None:
    """Apple and iOS Mail: ``mixed[plain, related[html, picture]]``."""
    related = _text_part(BODY_HTML, "html")
    related.add_related(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", cid="<logo>")

    mail = read_mail(_mixed(_text_part(BODY_PLAIN), related))

    assert [f.media_type for f in mail.embedded] == ["image/png"]
    assert [r.media_type for r in mail.repeated] == ["text/plain"]


def test_read_mail_leaves_out_an_html_part_beside_the_plain_body_that_says_the_same() -> None:
    """The other direction: a ``related`` whose root is the plain text, its HTML beside it."""
    related = EmailMessage()
    related["From"], related["Subject"] = "a@example.com", "Invoice"
    related.set_content(BODY_PLAIN)
    related.add_related(BODY_HTML, subtype="html")

    mail = read_mail(bytes(related))

    assert mail.embedded == ()
    assert [(r.media_type, r.found == r.words) for r in mail.repeated] == [("text/html", True)]


def test_read_mail_leaves_out_a_rendering_whose_signature_is_laid_out_differently() -> None:
    html = _text_part(BODY_HTML + "<table><tr><td><b>Marta Kowalska</b></td><td>Accounts</td>"
                      "</tr><tr><td colspan=2>+44 20 7946 0123 | harbour.example</td></tr>"
                      "</table>", "html")
    plain = _text_part(BODY_PLAIN + "-- \nMarta Kowalska - Accounts\nT: +44 20 7946 0123\n"
                       "W: harbour.example\n")

    mail = read_mail(_mixed(html, plain))

    assert mail.embedded == ()
    assert [(r.found, r.words) for r in mail.repeated] == [(44, 47)]  # not "image", "t", "w"


@pytest.mark.parametrize(("extra", "left_out"), [
    ("one two three four", True),  # 45 of 49 words in the body, 0.918
    ("one two three four five", False),  # 45 of 50, 0.9: at the share, left out
    ("one two three four five six", False),  # 45 of 51, 0.882: kept
], ids=["0.918", "0.900", "0.882"])
def test_read_mail_leaves_out_a_rendering_from_nine_tenths_of_its_words_in_the_body(
        extra: str, left_out: bool) -> None:
    plain = _text_part(BODY_PLAIN.replace("[image: Company logo]", "Company logo") + extra)

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), plain))

    assert (len(mail.repeated), len(mail.embedded)) == ((1, 0) if left_out else (0, 1))


def test_read_mail_hands_back_a_rendering_whose_signature_adds_words() -> None:
    plain = _text_part(BODY_PLAIN + "-- \nNorthwind Harbour Ltd, registered in England no. "
                       "04817263, 12 Quay Street, Bristol BS1 4DJ\n")

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), plain))

    assert [(f.name, f.media_type) for f in mail.embedded] == [("attachment-1.txt", "text/plain")]
    assert mail.repeated == ()


@pytest.mark.parametrize("added", [
    "The second page shows the credit note we agreed in February; it is already deducted.",
    "See you on Monday.",
    "_______________________________________________\nHarbour mailing list\n"
    "https://lists.example.org/listinfo/harbour",
    "BEGIN:VCALENDAR\nSUMMARY:Payment run\nEND:VCALENDAR",
], ids=["after-a-picture", "short", "list-footer", "calendar"])
def test_read_mail_hands_back_a_text_part_that_adds_words(added: str) -> None:
    subtype = "calendar" if added.startswith("BEGIN:VCALENDAR") else "plain"

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), _picture(),
                            _text_part(added, subtype)))

    assert [f.media_type for f in mail.embedded] == ["image/png", f"text/{subtype}"]
    assert mail.repeated == ()


def test_read_mail_hands_back_a_list_footer_whose_words_a_quoted_reply_holds() -> None:
    """A footer is a sliver of the body, not a rendering of it (real list mail quotes the
    footer of the message it answers)."""
    footer = ("_______________________________________________\nharbour mailing list\n"
              "harbour@lists.example.org\nhttps://lists.example.org/mailman/listinfo/harbour\n")
    body = ("Applied, thanks; it is in main since yesterday.\n\nOn Thursday Erdong wrote:\n"
            "> The ring data is freed twice when the decoder halts early.\n> Thanks.\n> "
            + footer.replace("\n", "\n> "))

    mail = read_mail(_mixed(_text_part(body), _text_part(footer)))

    assert [f.payload.decode() for f in mail.embedded] == [footer]
    assert mail.repeated == ()


@pytest.mark.parametrize("disposition", ["attachment", "inline"])
def test_read_mail_hands_back_a_named_text_file_that_says_the_same(disposition: str) -> None:
    named = _text_part(BODY_PLAIN, disposition=disposition, filename="invoice.txt")

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), named))

    assert [f.name for f in mail.embedded] == ["invoice.txt"]
    assert mail.repeated == ()


def test_read_mail_leaves_out_a_short_part_only_when_it_says_the_body_in_order() -> None:
    body = "<p>Thanks, that works for me.</p>"
    same, reordered = _text_part("Thanks, that works for me."), _text_part("For me that works.")

    mail = read_mail(_mixed(_text_part(body, "html"), same, reordered))

    assert [f.payload.decode() for f in mail.embedded] == ["For me that works.\n"]
    assert [(r.words, r.in_order) for r in mail.repeated] == [(5, True)]


def test_read_mail_hands_back_the_html_piece_after_an_apple_mail_picture() -> None:
    """``alternative[plain, mixed[html, picture, html]]``: the plain branch holds the whole
    text, so it is not a file; the second HTML piece is in no other part that is read."""
    pieces = EmailMessage()
    pieces.make_mixed()
    for part in (_text_part("<div>With Apple Mail you can put a picture here:</div>", "html"),
                 _picture(),
                 _text_part("<div>(that is the harbour at dawn)</div><div>Oh look, fonts!</div>",
                            "html")):
        pieces.attach(part)
    mail = EmailMessage()
    mail["From"], mail["Subject"] = "a@example.com", "just testing"
    mail.make_alternative()
    mail.attach(_text_part("With Apple Mail you can put a picture here:\n\n(that is the harbour "
                           "at dawn)\n\nOh look, fonts!"))
    mail.attach(pieces)

    found = read_mail(bytes(mail)).embedded

    assert [(f.name, f.media_type) for f in found] == [
        ("attachment-1", "image/png"), ("attachment-2.html", "text/html")]
    assert b"harbour at dawn" in found[1].payload


def test_read_mail_hands_back_one_rendering_of_an_alternative_after_a_picture() -> None:
    """``mixed[alternative, picture, alternative]``: the second pair is one piece of text; an
    invitation beside it is handed back."""
    def pair(text: str) -> EmailMessage:
        alternative = EmailMessage()
        alternative.make_alternative()
        alternative.attach(_text_part(text))
        alternative.attach(_text_part(f"<p>{text}</p>", "html"))
        return alternative

    second = pair("The south berth stays closed until June.")
    second.attach(_text_part("BEGIN:VCALENDAR\nSUMMARY:Berth board\nEND:VCALENDAR", "calendar"))

    mail = read_mail(_mixed(pair("The north berth opens on Monday."), _picture(), second))

    assert [f.media_type for f in mail.embedded] == ["image/png", "text/html", "text/calendar"]
    assert mail.repeated == ()


def test_repeated_note_names_each_part_and_stays_short() -> None:
    repeated = RepeatedPart("text/plain", 412, 58, 57, in_order=False)

    one = MailParts((), 3, repeated=(repeated,)).repeated_note
    many = MailParts((), 30, repeated=(repeated,) * 20).repeated_note

    assert one == ("1 text part not extracted separately: the message body already says what it "
                   "says (text/plain, 412 bytes, 57 of 58 words in the body)")
    assert many is not None and len(many) <= 280
    assert many.startswith("20 text parts") and many.endswith("; and 17 more)")
    assert MailParts((), 1).repeated_note is None


def test_extract_attachment_reports_a_left_out_rendering_in_the_message_notes() -> None:
    payload = _mixed(_text_part(BODY_HTML, "html"), _text_part(BODY_PLAIN))

    item = extract_attachment(Attachment(label="mail.eml", payload=payload), _router())

    assert item.attachments == ()
    assert "4,180.00 EUR" in item.text and "Attached:" not in item.text
    assert item.notes == ("1 text part not extracted separately: the message body already says "
                          f"what it says (text/plain, {len(BODY_PLAIN)} bytes, 44 of 45 words "
                          "in the body)",)


# --- hostile text parts ----------------------------------------------------------------

@pytest.mark.timeout(60)  # a parser that rescans would take minutes here, not fail
@pytest.mark.parametrize("markup", [
    "<a " * 80_000, "<!--" * 60_000, "<![" * 80_000, "<" + "a" * 250_000,
    "<div>" * 25_000 + "</div>" * 20_000, "<title>" + "x " * 120_000,
], ids=["unclosed-tags", "unclosed-comments", "marked-sections", "one-long-tag", "deep",
        "unclosed-title"])
def test_read_mail_compares_hostile_html_parts_in_linear_time(markup: str) -> None:
    assert len(markup) < COMPARED_BYTES  # compared, not skipped for its size
    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), _text_part(markup, "html")))

    assert [f.media_type for f in mail.embedded] == ["text/html"]  # nothing to match: kept
    assert mail.repeated == ()


@pytest.mark.timeout(60)
def test_read_mail_reads_a_hostile_html_body_in_linear_time() -> None:
    body = "<p>" + "<a " * 80_000 + "</p>"  # under COMPARED_BYTES: all of it is read

    mail = read_mail(_mixed(_text_part(body, "html"), _text_part(BODY_PLAIN)))

    assert [f.media_type for f in mail.embedded] == ["text/plain"]


def test_read_mail_finds_the_body_in_deeply_nested_html() -> None:
    nested = "<div>" * 20_000 + BODY_HTML + "</div>" * 20_000

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), _text_part(nested, "html")))

    assert mail.embedded == () and len(mail.repeated) == 1


def test_read_mail_stops_comparing_when_its_budget_is_spent() -> None:
    copy = BODY_PLAIN * 20  # 5.4 KB, the same words
    copies = [_text_part(copy) for _ in range(400)]

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), *copies))

    assert len(mail.embedded) + len(mail.repeated) == 400  # every part is accounted for
    assert len(mail.repeated) == -(-BUDGET_BYTES // len(copy))  # compared until spent
    assert {f.media_type for f in mail.embedded} == {"text/plain"}


def test_read_mail_keeps_a_part_longer_than_it_compares() -> None:
    long_plain = BODY_PLAIN * (COMPARED_BYTES // len(BODY_PLAIN) + 1)  # its tail is unread

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), _text_part(long_plain)))

    assert [f.media_type for f in mail.embedded] == ["text/plain"]
    assert mail.repeated == ()


@pytest.mark.parametrize("charset", ["punycode", "idna", "unicode-escape", "x-unknown"])
def test_read_mail_reads_a_part_in_an_undeclarable_charset_as_utf8(charset: str) -> None:
    plain = _text_part(BODY_PLAIN)
    plain.set_param("charset", charset)

    mail = read_mail(_mixed(_text_part(BODY_HTML, "html"), plain))

    assert len(mail.repeated) == 1


# --- renderings in scripts written without spaces ---------------------------------------

CJK_BODIES = {
    "chinese": ("各位同事：\n泊位分配评审会议改到<b>星期四下午两点</b>，在三楼十二号会议室举行。"
                "议程包括北泊位疏浚计划、四号起重机维护窗口以及五月份夜班人员安排。\n"
                "幻灯片已经放在运营网站上。如有修改意见，请在星期三中午之前发给我。\n谢谢！\n王强"),
    "japanese": ("チームの皆さん\n岸壁割り当ての見直し会議は<b>木曜日の午後二時</b>に"
                 "変更になりました。場所は三階の会議室です。議題は北岸壁の浚渫計画、四号クレーンの点検日程、"
                 "そして五月の夜勤体制です。\n資料は運用サイトに置いてあります。修正があれば"
                 "水曜日の正午までにお知らせください。\nよろしくお願いします。\n山田"),
    "korean": ("팀원 여러분,\n선석 배정 검토 회의가 <b>목요일 오후 두 시</b>로 변경되었습니다. "
               "장소는 3층 12호 회의실입니다. 안건은 북쪽 선석 준설 계획, 4호 크레인 점검 일정, "
               "그리고 5월 야간 근무 편성입니다.\n자료는 "
               "운영 사이트에 올려 두었습니다. 수정 사항이 "
               "있으면 수요일 정오까지 알려 주세요.\n감사합니다.\n김민수"),
    "mixed": ("Hi team / 各位：\nQ3 报告的 draft 已经放在 SharePoint 上了，请在 Friday 之前"
              "review 一下。重点是 Crane 4 的 maintenance window 和北泊位 dredging 的预算。\n"
              "如果有问题，直接回复这封邮件或者打我的分机 4512。\nThanks, 王强"),
}
"""One message per script, each line a paragraph; ``<b>`` marks what the HTML emphasises."""


def _cjk_html(text: str) -> str:
    return "".join(f"<div>{line}</div>" for line in text.split("\n"))


def _cjk_plain(text: str, columns: int) -> str:
    """The plain rendering a mailer makes: tags gone, lines wrapped at `columns` display
    columns (a wide character takes two), breaking between any two wide characters and at
    the spaces of Latin or Korean text, as UAX #14 lets a wrapper do."""
    lines: list[str] = []
    for paragraph in text.replace("<b>", "").replace("</b>", "").split("\n"):
        line, width = "", 0
        for piece in re.findall(r"[A-Za-z0-9@.:/_'-]+|\s|.", paragraph):
            size = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in piece)
            if width + size > columns and line:
                lines.append(line.rstrip())
                line, width = ("", 0) if piece.isspace() else (piece, size)
                continue
            line, width = line + piece, width + size
        lines.append(line.rstrip())
        lines.append("")
    return "\n".join(lines)


def _apple_mixed(plain: str, html: str) -> bytes:
    """Apple and iOS Mail: ``mixed[plain, related[html, picture]]``."""
    related = _text_part(html, "html")
    related.add_related(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", cid="<p1>")
    return _mixed(_text_part(plain), related)


@pytest.mark.parametrize("columns", [20, 37, 76])
@pytest.mark.parametrize("language", list(CJK_BODIES))
def test_read_mail_leaves_out_a_wrapped_cjk_rendering_beside_a_related_html_body(
        language: str, columns: int) -> None:
    text = CJK_BODIES[language]

    mail = read_mail(_apple_mixed(_cjk_plain(text, columns), _cjk_html(text)))

    assert [f.media_type for f in mail.embedded] == ["image/png"]
    (repeated,) = mail.repeated
    assert (repeated.media_type, repeated.found) == ("text/plain", repeated.words)


@pytest.mark.parametrize("columns", [20, 76])
@pytest.mark.parametrize("html_first", [True, False], ids=["html-plain", "plain-html"])
@pytest.mark.parametrize("language", list(CJK_BODIES))
def test_read_mail_leaves_out_a_wrapped_cjk_rendering_side_by_side_with_the_body(
        language: str, html_first: bool, columns: int) -> None:
    text = CJK_BODIES[language]
    html, plain = _text_part(_cjk_html(text), "html"), _text_part(_cjk_plain(text, columns))

    mail = read_mail(_mixed(*((html, plain) if html_first else (plain, html))))

    assert mail.embedded == ()
    assert [r.media_type for r in mail.repeated] == ["text/plain"]


@pytest.mark.parametrize("language", list(CJK_BODIES))
def test_read_mail_leaves_out_a_cjk_html_part_beside_its_wrapped_plain_body(
        language: str) -> None:
    """The other direction: a ``related`` whose root is the wrapped plain text."""
    text = CJK_BODIES[language]
    related = EmailMessage()
    related.set_content(_cjk_plain(text, 30))
    related.add_related(_cjk_html(text), subtype="html")

    mail = read_mail(bytes(related))

    assert mail.embedded == ()
    assert [r.media_type for r in mail.repeated] == ["text/html"]


def test_read_mail_leaves_out_a_short_cjk_reply_said_in_the_same_order() -> None:
    same, reordered = _text_part("谢谢，\n没问题。"), _text_part("没问题，谢谢。")

    mail = read_mail(_mixed(_text_part("<p>谢谢，没问题。</p>", "html"), same, reordered))

    assert [f.payload.decode() for f in mail.embedded] == ["没问题，谢谢。\n"]
    assert [(r.words, r.in_order) for r in mail.repeated] == [(3, True)]


CJK_ADDITIONS = {
    "list-footer": ("_______________________________________________\n港口运营邮件列表\n"
                    "harbour-ops@lists.example.org\n退订或修改设置请访问 "
                    "https://lists.example.org/listinfo/harbour-ops\n"),
    "other-message": ("各位同事：\n四号起重机的维护工作提前到星期二上午完成，"
                      "星期四之前可以恢复作业。夜班人员请按原计划到岗。\n谢谢！\n李娜"),
    "after-picture": "这是今天早上拍的起重机照片：吊臂上的锈比三月份更严重了。\n",
    "postscript": CJK_BODIES["chinese"].replace("<b>", "").replace("</b>", "")
                  + "\n附言：银行账户上周已经变更，以后请使用新的账户付款，旧账户将于下月关闭。",
}


@pytest.mark.parametrize("added", list(CJK_ADDITIONS))
def test_read_mail_hands_back_a_cjk_part_that_adds_words(added: str) -> None:
    text = CJK_BODIES["chinese"]
    quoted_footer = text + "\n> " + CJK_ADDITIONS["list-footer"].replace("\n", "\n> ")

    mail = read_mail(_apple_mixed(_cjk_plain(CJK_ADDITIONS[added], 40),
                                  _cjk_html(quoted_footer if added == "list-footer" else text)))

    assert [f.media_type for f in mail.embedded] == ["text/plain", "image/png"]
    assert mail.repeated == ()


@pytest.mark.parametrize("language", ["japanese", "korean"])
def test_read_mail_hands_back_a_message_in_another_cjk_language_beside_the_body(
        language: str) -> None:
    """The same meeting told in Japanese or Korean beside the Chinese body is not its
    rendering: kanji the two share do not make their pairs of characters the same."""
    mail = read_mail(_mixed(_text_part(_cjk_html(CJK_BODIES["chinese"]), "html"),
                            _text_part(_cjk_plain(CJK_BODIES[language], 40))))

    assert [f.media_type for f in mail.embedded] == ["text/plain"]


def test_read_mail_leaves_out_a_wrapped_thai_rendering() -> None:
    """Thai is written without spaces too, and its vowel marks are no ``\\w``."""
    text = "ประชุมทบทวนการจัดสรรท่าเรือย้ายไปวันพฤหัสบดีเวลาบ่ายสองโมงที่ห้องประชุมชั้นสาม"
    plain = "\n".join(text[i:i + 17] for i in range(0, len(text), 17))

    mail = read_mail(_mixed(_text_part(f"<p>{text}</p>", "html"), _text_part(plain)))

    assert mail.embedded == () and len(mail.repeated) == 1


_DISTINCT_HAN = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(85_000))
"""85,000 ideographs (255 KB in UTF-8), nearly every pair of them a different word."""


@pytest.mark.timeout(60)  # a quadratic scan of 85,000 characters takes minutes, not seconds
@pytest.mark.parametrize("text", [
    "中" * 87_000, "中 " * 65_000, "中\n" * 65_000, "中" + " " * 250_000 + "a",
    _DISTINCT_HAN, "<a 中" * 40_000, "ก\u0e31" * 40_000,
], ids=["one-character", "spaced", "one-per-line", "long-gap", "distinct-pairs",
        "unclosed-tags", "thai-marks"])
def test_read_mail_compares_hostile_cjk_parts_in_linear_time(text: str) -> None:
    assert len(text.encode()) < COMPARED_BYTES  # compared, not skipped for its size
    subtype = "html" if text.startswith("<") else "plain"

    mail = read_mail(_mixed(_text_part(_cjk_html(CJK_BODIES["chinese"]), "html"),
                            _text_part(text, subtype)))

    assert [f.media_type for f in mail.embedded] == [f"text/{subtype}"]  # says other things
    assert mail.repeated == ()


@pytest.mark.timeout(60)
def test_read_mail_leaves_out_a_rendering_of_a_long_cjk_body_in_linear_time() -> None:
    """The body's 255 KB are read whole; a wrapped copy of them is its rendering."""
    wrapped = "\n".join(_DISTINCT_HAN[i:i + 38] for i in range(0, len(_DISTINCT_HAN), 38))

    mail = read_mail(_mixed(_text_part(f"<p>{_DISTINCT_HAN}</p>", "html"),
                            _text_part(wrapped)))

    assert mail.embedded == ()
    (repeated,) = mail.repeated
    assert repeated.found == repeated.words > 19_000  # every pair of the part in the body


# --- invitations in the body's alternative --------------------------------------------

INVITE_TEXT = ("Team,\n\nThe berth allocation review moves to Thursday. Agenda: north berth "
               "dredging, crane 4 maintenance, night shifts in May.\n\nThanks,\nJonas\n")


def _outlook_ics(description: str = INVITE_TEXT, *, size: int = 0) -> bytes:
    """Exchange's meeting request: a time zone block, the event, an alarm; folded at 75."""
    escaped = description.replace("\\", "\\\\").replace(",", "\\,").replace("\n", "\\n")
    lines = [
        "BEGIN:VCALENDAR", "METHOD:REQUEST", "PRODID:Microsoft Exchange Server 2010",
        "VERSION:2.0", "BEGIN:VTIMEZONE", "TZID:W. Europe Standard Time", "BEGIN:STANDARD",
        "DTSTART:16010101T030000", "TZOFFSETFROM:+0200", "TZOFFSETTO:+0100",
        "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=10", "END:STANDARD", "END:VTIMEZONE",
        "BEGIN:VEVENT", 'ORGANIZER;CN="Berg, Jonas":mailto:jonas.berg@example.com',
        "ATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=TRUE;CN=Dana Reyes:mailto:"
        "dana.reyes@example.com", f"DESCRIPTION;LANGUAGE=en-US:{escaped}",
        "UID:040000008200E00074C5B7101A82E00800000000", "SUMMARY;LANGUAGE=en-US:Berth "
        "allocation review", "DTSTART;TZID=W. Europe Standard Time:20240516T140000",
        "DTEND;TZID=W. Europe Standard Time:20240516T150000", "CLASS:PUBLIC",
        "PRIORITY:5", "DTSTAMP:20240510T091500Z", "TRANSP:OPAQUE", "STATUS:CONFIRMED",
        "SEQUENCE:0", "LOCATION;LANGUAGE=en-US:Room 3.12", "X-MICROSOFT-CDO-BUSYSTATUS:BUSY",
        *(f"X-FILLER:{'x' * 70}" for _ in range(size // 80)),
        "BEGIN:VALARM", "DESCRIPTION:REMINDER", "TRIGGER;RELATED=START:-PT15M",
        "ACTION:DISPLAY", "END:VALARM", "END:VEVENT", "END:VCALENDAR"]
    folded = []
    for line in lines:
        data = line.encode()
        folded.append(b"\r\n ".join(data[i:i + 74] for i in range(0, len(data), 74)))
    return b"\r\n".join(folded) + b"\r\n"


def _invitation(ics: bytes, *, plain: str = INVITE_TEXT) -> EmailMessage:
    """Outlook's ``alternative[plain, html, calendar; method=REQUEST]``, base64 as Exchange
    sends it."""
    mail = EmailMessage()
    mail["From"], mail["Subject"] = "jonas.berg@example.com", "Berth allocation review"
    mail.set_content(plain)
    mail.add_alternative("".join(f"<p>{p}</p>" for p in plain.split("\n\n")), subtype="html")
    mail.add_alternative(ics, maintype="text", subtype="calendar",
                         params={"method": "REQUEST", "charset": "utf-8"})
    return mail


OUTLOOK_INVITATION = ("Invitation: Berth allocation review\n"
                      "When: 2024-05-16 14:00 to 15:00 (W. Europe Standard Time)\n"
                      "Where: Room 3.12\n"
                      "Organizer: Berg, Jonas <jonas.berg@example.com>\n"
                      "Attendees: Dana Reyes <dana.reyes@example.com>")


def test_read_mail_reads_an_outlook_invitation_in_the_body_alternative_as_text() -> None:
    """The description is the body again (Outlook copies it), so it is not repeated."""
    mail = read_mail(bytes(_invitation(_outlook_ics())))

    assert mail.embedded == () and mail.repeated == ()
    (invitation,) = mail.invitations
    assert invitation.text == OUTLOOK_INVITATION
    assert (invitation.events, invitation.descriptions_left_out) == (1, 1)


def test_read_mail_keeps_an_invitation_description_the_body_does_not_hold() -> None:
    ics = _outlook_ics("Bring the dredging survey from April; the crane vendor dials in.")

    (invitation,) = read_mail(bytes(_invitation(ics))).invitations

    assert invitation.text.endswith("\nDescription: Bring the dredging survey from April; the "
                                    "crane vendor dials in.")
    assert invitation.descriptions_left_out == 0


def test_read_mail_reads_a_google_invitation_and_hands_back_its_named_ics_file() -> None:
    """Google Calendar: ``mixed[alternative[plain, html, calendar], invite.ics]``; a named
    file is handed back whatever it says."""
    ics = _outlook_ics().replace(b"PRODID:Microsoft Exchange Server 2010",
                                 b"PRODID:-//Google Inc//Google Calendar 70.9054//EN")
    mail = _invitation(ics)
    mail.make_mixed()
    mail.add_attachment(ics, maintype="application", subtype="ics", filename="invite.ics")

    found = read_mail(bytes(mail))

    assert [(f.name, f.media_type) for f in found.embedded] == [
        ("invite.ics", "application/ics")]
    assert [i.text for i in found.invitations] == [OUTLOOK_INVITATION]


def test_read_mail_hands_back_other_text_in_the_body_alternative_but_not_its_renderings(
        ) -> None:
    mail = _invitation(_outlook_ics())
    mail.add_alternative("<p>Team, the review moves.</p>", subtype="watch-html")
    mail.add_alternative("<bold>Team</bold>, the review moves.", subtype="enriched")
    mail.add_alternative("BEGIN:VCARD\nFN:Jonas Berg\nEND:VCARD", subtype="vcard")

    found = read_mail(bytes(mail))

    assert [(f.name, f.media_type) for f in found.embedded] == [
        ("attachment-1", "text/vcard")]
    assert len(found.invitations) == 1


def test_extract_attachment_gives_an_invitation_after_the_body_with_a_note() -> None:
    payload = bytes(_invitation(_outlook_ics()))

    item = extract_attachment(Attachment(label="invite.eml", payload=payload), _router())

    assert item.text.endswith("Jonas\n\n" + OUTLOOK_INVITATION)
    assert item.text.count("night shifts in May") == 1
    assert item.attachments == ()
    assert item.notes == (
        f"1 invitation (text/calendar in the message body's alternative, "
        f"{len(_outlook_ics())} bytes) given as text after the body: each event's title, "
        "time, place, people and description; time zone rules, alarms and other properties "
        "left out; 1 description left out, the body already says it",)
    assert item.elements[-1].category == "Text"
    assert item.text[item.elements[-1].start:item.elements[-1].end] == OUTLOOK_INVITATION


@pytest.mark.parametrize(("ics", "why"), [
    (_outlook_ics(size=COMPARED_BYTES), "bytes, over the 262144 read as an invitation"),
    (b"BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nEND:VCALENDAR\r\n",
     "no event in it that says what, when or where"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "no event in it that says what, when or where"),
], ids=["huge", "no-event", "binary"])
def test_read_mail_hands_back_an_invitation_it_cannot_read_and_says_why(ics: bytes,
                                                                        why: str) -> None:
    found = read_mail(bytes(_invitation(ics)))

    assert [(f.name, f.media_type, f.payload) for f in found.embedded] == [
        ("attachment-1.ics", "text/calendar", ics)]
    (note,) = found.invitation_notes
    assert note.startswith("1 text/calendar part in the message body's alternative handed back "
                           "as files, not read as invitations (attachment-1.ics: ")
    assert why in note and found.invitations == ()


def test_read_mail_reads_a_few_invitations_per_message_and_hands_back_the_rest() -> None:
    mail = _invitation(_outlook_ics())
    for _ in range(MAX_CALENDARS + 2):
        mail.add_alternative(_outlook_ics(), maintype="text", subtype="calendar")

    found = read_mail(bytes(mail))

    assert len(found.invitations) == MAX_CALENDARS
    assert [f.name for f in found.embedded] == ["attachment-1.ics", "attachment-2.ics",
                                                "attachment-3.ics"]
    assert all(len(note) <= 280 for note in found.invitation_notes)
    assert found.invitation_notes[1].endswith(f"more than {MAX_CALENDARS} in one message)")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ics", [
    b"BEGIN:VEVENT\r\nSUMMARY:x" + b"\r\n y" * 60_000 + b"\r\n",
    b"BEGIN:VEVENT\r\n" * 17_000 + b"SUMMARY:deep\r\n",
    b"BEGIN:VEVENT\r\n" + b'X;A="' * 50_000 + b"\r\nSUMMARY:x\r\n",
    b"BEGIN:VEVENT\r\nSUMMARY:" + b"\\" * 250_000 + b"\r\n",
    b"BEGIN:VEVENT\r\n" + b";" * 250_000 + b"\r\n",
    b"BEGIN:VEVENT\r\n" + b"ATTENDEE;CN=a:mailto:a\r\n" * 10_000,
], ids=["folded-lines", "nested-events", "open-quotes", "backslashes", "separators",
        "attendees"])
def test_read_mail_reads_a_hostile_invitation_in_linear_time(ics: bytes) -> None:
    assert len(ics) < COMPARED_BYTES  # read, not handed back for its size

    found = read_mail(bytes(_invitation(ics)))

    assert len(found.invitations) + len(found.embedded) == 1  # read, or handed back and said
    assert len(found.invitation_notes) == 1


@pytest.mark.parametrize("boundary", ["----=_NextPart_000_0001", "=_a", "x=y=z"])
def test_an_unquoted_boundary_holding_an_equals_sign_still_divides_the_parts(
        boundary: str) -> None:
    # Outlook Express wrote boundary=----=_NextPart_...; Python reads "----" unquoted
    raw = (f"From: a@example.com\nSubject: Outlook\nMIME-Version: 1.0\n"
           f"Content-Type: multipart/alternative;\n\tboundary={boundary}\n\n"
           f"--{boundary}\nContent-Type: text/plain\n\nPlain words here.\n"
           f"--{boundary}\nContent-Type: text/html\nContent-Transfer-Encoding: "
           f"quoted-printable\n\n<p class=3D\"x\">Plain words here.</p>\n--{boundary}--\n"
           ).encode()
    parts = read_mail(raw)
    assert parts.unsplit is None and parts.parts == 3
    assert parts.mended is not None and f'boundary="{boundary}"'.encode() in parts.mended

    parsed = UnstructuredExtractor().extract("eml", None, raw, max_pages=10)
    assert "Plain words here." in parsed.text and "=3D" not in parsed.text
    assert parsed.mail is not None and parsed.mail.subject == "Outlook"


def test_a_boundary_in_the_body_text_is_left_as_written() -> None:
    raw = (b"Content-Type: text/plain\n\nPaste: Content-Type: multipart/mixed; "
           b"boundary=a=b\n")
    assert read_mail(raw).mended is None  # only a header line is ever mended


def test_a_bounce_hands_back_its_delivery_status_as_text() -> None:
    raw = (b"From: MAILER-DAEMON@example.com\nSubject: Undelivered\nMIME-Version: 1.0\n"
           b'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\n\n'
           b"--b\nContent-Type: text/plain\n\nDelivery failed.\n"
           b"--b\nContent-Type: message/delivery-status\n\n"
           b"Reporting-MTA: dns; mx.example.com\n\n"
           b"Final-Recipient: rfc822; gone@example.org\nAction: failed\nStatus: 5.1.1\n"
           b"--b--\n")
    (status,) = read_mail(raw).embedded
    assert status.media_type == "text/plain" and status.name == "delivery-status-1.txt"
    assert b"Final-Recipient: rfc822; gone@example.org" in status.payload
    assert b"Status: 5.1.1" in status.payload


@pytest.mark.parametrize("declared", ["gb2312", "iso-2022-jp", "koi8-r", "no-such-charset"])
def test_a_utf8_body_under_another_charset_is_read_as_utf8_with_a_note(declared: str) -> None:
    body = "Grüße, すみません, 尊敬的管理员".encode()
    raw = (f"From: a@example.com\nSubject: Hi\nMIME-Version: 1.0\n"
           f"Content-Type: text/plain; charset={declared}\n"
           f"Content-Transfer-Encoding: 8bit\n\n").encode() + body + b"\n"
    parts = read_mail(raw)
    if declared == "koi8-r":  # every byte is a koi8-r letter: it reads, as it says
        assert parts.relabelled == () and parts.mended is None
        return
    assert parts.relabelled == (("text/plain", declared),)

    parsed = UnstructuredExtractor().extract("eml", None, raw, max_pages=10)
    assert "すみません" in parsed.text and "\ufffd" not in parsed.text
    assert any("read as UTF-8" in note and declared in note for note in parsed.notes)


def test_a_body_that_reads_in_its_declared_charset_is_left_alone() -> None:
    raw = (b"From: a@example.com\nSubject: Hi\nMIME-Version: 1.0\n"
           b"Content-Type: text/plain; charset=iso-8859-1\n"
           b"Content-Transfer-Encoding: 8bit\n\n") + "Grüße\n".encode("latin-1")
    parts = read_mail(raw)
    assert parts.relabelled == () and parts.mended is None
