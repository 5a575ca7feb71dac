"""Findings of the sweep over documents other projects left on a machine.

``benchmarks/realdocs_sweep.py`` ran `extract_many` and `extract_attachment`
over files nobody made for capsa: Python's e-mail and codec test data,
LibreOffice's templates, packages' documentation. Each test here pins one
thing that sweep found, on an input made in code with the same shape (no
found file is copied): the bytes that mattered are a few lines long. Python's
own CJK codec test files, which every CPython build carries in its test
package, are read where the interpreter keeps them (skipped where it has none).
"""

from __future__ import annotations

import io
import re
import shutil
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    extract_attachment,
    sniff,
)
from capsa.guard.extractors import OfficeExtractor, Router, default_router
from capsa.guard.normalize import UndecodableText, decode_text, detect_and_decode
from capsa.guard.sniff import media_type_for_name

LEGACY = Path(__file__).resolve().parent / "files" / "legacy"
needs_soffice = pytest.mark.skipif(shutil.which("soffice") is None,
                                   reason="LibreOffice is not installed (make system-deps)")


# --- OpenDocument templates (LibreOffice's .ott, .ots, .otp) -----------------------------

def as_template(odf: bytes) -> bytes:
    """An OpenDocument file re-stamped as its template.

    LibreOffice's own templates (``/usr/lib/libreoffice/share/template``) differ
    from documents in their ``mimetype`` member (``...opendocument.text-template``)
    and the package's own entry in ``META-INF/manifest.xml``; LibreOffice refuses a
    file whose two disagree.
    """
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(odf)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "mimetype":
                data = data + b"-template"
            elif info.filename == "META-INF/manifest.xml":  # the package's own entry says so too
                data = re.sub(rb'(manifest:full-path="/"[^>]*?opendocument\.[a-z]+)|'
                              rb'(opendocument\.[a-z]+)("[^>]*?manifest:full-path="/")',
                              lambda m: (m.group(1) + b"-template" if m.group(1)
                                         else m.group(2) + b"-template" + m.group(3)), data)
            target.writestr(info, data, compress_type=info.compress_type)
    return out.getvalue()


@pytest.mark.parametrize(("name", "kind"), [
    ("report.odt", "odt"), ("berths.ods", "ods"), ("slides.odp", "odp")])
def test_an_opendocument_template_is_sniffed_as_its_document_kind(name: str, kind: str) -> None:
    template = as_template((LEGACY / name).read_bytes())

    assert b"opendocument." + {"odt": b"text", "ods": b"spreadsheet",
                               "odp": b"presentation"}[kind] + b"-template" in template[:120]
    assert sniff(template) == kind


@pytest.mark.parametrize(("name", "kind"), [
    ("CV.ott", "odt"), ("styles.ots", "ods"), ("Focus.otp", "odp")])
def test_a_template_name_declares_its_document_kind(name: str, kind: str) -> None:
    from capsa.guard.sniff import kind_for_media_type

    assert kind_for_media_type(media_type_for_name(name)) == kind


def test_other_opendocument_subtypes_stay_unsupported() -> None:
    """A master document or a drawing is not a text document with another name."""
    master = (LEGACY / "report.odt").read_bytes().replace(
        b"opendocument.text", b"opendocument.text-master", 1)

    assert sniff(master) == "zip"


@pytest.fixture(scope="module")
def office_pool() -> Iterator[IsolatedExtractor]:
    with IsolatedExtractor(Router([OfficeExtractor()]), workers=1) as pool:
        yield pool


@pytest.mark.slow
@needs_soffice
@pytest.mark.parametrize(("name", "template", "words"), [
    ("report.odt", "report.ott", "Harbour Operations Report"),
    ("berths.ods", "berths.ots", "South\t97\t830000"),
    ("slides.odp", "slides.otp", "Northwind Port Authority"),
])
def test_an_opendocument_template_is_extracted_like_its_document(
        office_pool: IsolatedExtractor, name: str, template: str, words: str) -> None:
    payload = as_template((LEGACY / name).read_bytes())

    done = extract_attachment(
        Attachment(label=template, media_type=media_type_for_name(template), payload=payload),
        office_pool, ExtractionLimits(timeout_s=120, cpu_s=120))

    assert words in done.text


# --- Windows bitmaps -------------------------------------------------------------------

def bitmap(width: int = 8, height: int = 8) -> bytes:
    """A 24-bit BMP as Pillow writes it (about a third of its bytes are NUL)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, format="BMP")
    return out.getvalue()


def test_a_bitmap_is_refused_as_a_bitmap_not_as_undecodable_text() -> None:
    from capsa.guard.extractors import PlainTextExtractor

    payload = bitmap()
    assert sniff(payload) == "bmp"
    with pytest.raises(IngestionRejected) as refused:
        extract_attachment(Attachment(label="python.bmp", payload=payload,
                                      media_type=media_type_for_name("python.bmp")),
                           PlainTextExtractor())

    assert refused.value.reason == "unsupported_type"
    assert "bitmap" in refused.value.detail and "PNG" in refused.value.detail


def test_text_that_starts_with_bm_is_still_text() -> None:
    assert sniff(b"BM meeting notes: berths 4 and 5 reopen on Monday.\n") == "text"


# --- 7-bit ISO-2022 text --------------------------------------------------------------

JAPANESE = "Python の開発は、1990 年ごろから開始されています。\n"
KOREAN = "파이썬(Python)은 배우기 쉽고, 강력한 프로그래밍 언어입니다.\n"


@pytest.mark.parametrize(("text", "encoding"), [
    (JAPANESE, "iso2022_jp"), (KOREAN, "iso2022_kr")], ids=["iso2022_jp", "iso2022_kr"])
def test_iso2022_text_is_decoded_not_read_as_ascii(text: str, encoding: str) -> None:
    """As Python's ``test/cjkencodings/iso2022_*.txt`` are: pure ASCII bytes with escapes.

    Read as UTF-8 it decodes without error, so it came out as ``$B%F%9%H``-style
    letters; unstructured's ``partition_text`` decoded it correctly.
    """
    payload = text.encode(encoding) * 3
    assert payload.isascii()

    decoded = detect_and_decode(payload)

    assert decoded.text == text * 3
    assert decoded.encoding == encoding


def test_an_ascii_log_with_terminal_colours_is_not_taken_for_iso2022() -> None:
    payload = b"build \x1b[32mpassed\x1b[0m in 4 s\n"

    assert detect_and_decode(payload).encoding is None


def test_iso2022_text_reaches_the_extracted_text() -> None:
    from capsa.guard.extractors import PlainTextExtractor

    done = extract_attachment(Attachment(label="iso2022_jp.txt",
                                         payload=JAPANESE.encode("iso2022_jp")),
                              PlainTextExtractor())

    assert done.text.strip() == JAPANESE.strip()
    assert done.encoding == "iso2022_jp"


# --- Python's own CJK codec test files ------------------------------------------------
# Read where the interpreter keeps them (not copied): each legacy file beside its UTF-8
# twin. The sweep found cp949, johab and hz refused or garbled; generated sentences in
# every CJK codec are in tests/unit/guard/test_normalize.py.

CJKENCODINGS = Path(sysconfig.get_path("stdlib")) / "test" / "cjkencodings"
needs_cjkencodings = pytest.mark.skipif(not CJKENCODINGS.is_dir(),
                                        reason="this interpreter has no test/cjkencodings")
READ_AS_WRITTEN = ["big5", "euc_jisx0213", "euc_jp", "euc_kr", "gb18030", "gb2312", "gbk", "hz",
                   "iso2022_jp", "iso2022_kr", "shift_jis", "shift_jisx0213"]


@needs_cjkencodings
@pytest.mark.parametrize("name", READ_AS_WRITTEN)
def test_pythons_cjk_codec_test_file_is_read_as_its_utf8_twin(name: str) -> None:
    legacy = (CJKENCODINGS / f"{name}.txt").read_bytes()
    twin = (CJKENCODINGS / f"{name}-utf8.txt").read_text("utf-8")

    assert decode_text(legacy) == twin


@needs_cjkencodings
@pytest.mark.parametrize("name", ["cp949", "johab"])
def test_pythons_strings_of_rare_hangul_are_refused_naming_the_readings(name: str) -> None:
    """Rare syllables, circled letters and hanja: valid cp949 (and GB18030) or Johab, but
    with almost none of Korean's common syllables, and the detector finds nothing."""
    with pytest.raises(UndecodableText, match=f"decodes strictly .*as {name}, .*too few"):
        decode_text((CJKENCODINGS / f"{name}.txt").read_bytes())


@needs_cjkencodings
@pytest.mark.xfail(strict=True, reason="23 bytes of rare HKSCS characters and Latin letters "
                   "with combining marks: no reading has a common character, and the detector "
                   "reads Mac Central European")
def test_pythons_short_big5hkscs_file_is_read_as_its_utf8_twin() -> None:
    legacy = (CJKENCODINGS / "big5hkscs.txt").read_bytes()

    assert decode_text(legacy) == (CJKENCODINGS / "big5hkscs-utf8.txt").read_text("utf-8")


# --- e-mail: text the body did not show -----------------------------------------------

FORWARD = b"""From: "Sender" <sender@example.net>
To: <someone@example.com>
Subject: GroupwiseForwardingTest
Mime-Version: 1.0
Content-Type: message/rfc822

From: "Dr. Sender" <sender@example.net>
To: "Recipient" <recipient@example.com>
Subject: GroupwiseForwardingTest
Content-Type: text/plain; charset=ISO-8859-15

Testing email forwarding with Groupwise 1.2.2010
"""
"""Shaped as Python's ``test_email/data/msg_46.txt``: a forward that is the whole message."""

SPLIT_BODY = b"""From: list@example.org
To: members@example.org
Subject: Berth schedule
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="B"

--B
Content-Type: multipart/alternative; boundary="A"

--A
Content-Type: text/plain

The north berth opens on Monday.
--A
Content-Type: text/html

<p>The north berth opens on Monday.</p>
--A--
--B
Content-Type: image/png
Content-Disposition: inline

--B
Content-Type: text/plain

The south berth stays closed until June.
--B
Content-Type: text/plain

_______________________________________________
Harbour mailing list: unsubscribe at harbour-request@example.org
--B
Content-Type: text/calendar

BEGIN:VCALENDAR
SUMMARY:Berth board meeting
END:VCALENDAR
--B--
"""
"""A body split around an inline picture, a list footer and an invitation, as mail
clients and Mailman send them (Python's ``msg_02.txt``, a Mailman digest, lost its
table of contents and footer the same way)."""


def _mail(payload: bytes, label: str = "mail.eml") -> Extracted:
    return extract_attachment(Attachment(label=label, payload=payload,
                                         media_type="message/rfc822"),
                              default_router(), ExtractionLimits.for_ingestion())


def test_a_message_that_is_one_forwarded_message_hands_that_message_back() -> None:
    done = _mail(FORWARD)

    assert [child.label for child in done.attachments] == [
        "mail.eml/GroupwiseForwardingTest.eml"]
    forwarded = done.attachments[0]
    assert isinstance(forwarded, Extracted)
    assert "Testing email forwarding with Groupwise" in forwarded.text


def test_text_parts_beside_the_body_are_handed_back_not_dropped() -> None:
    done = _mail(SPLIT_BODY)

    assert done.text.startswith("The north berth opens on Monday.")
    texts = [child.text for child in done.attachments if isinstance(child, Extracted)]
    assert "The south berth stays closed until June." in texts
    assert any("unsubscribe at harbour-request" in text for text in texts)
    assert any("Berth board meeting" in text for text in texts)
    # the plain alternative of the HTML body is the body again, not a second file
    assert not any("north berth" in text for text in texts)


def test_empty_text_parts_do_not_become_files() -> None:
    """Python's ``msg_08.txt``: four empty parts; the message has no text, and no children."""
    empty = (b'MIME-Version: 1.0\nSubject: Lyrics\nContent-Type: multipart/mixed; '
             b'boundary="B"\n\n--B\nContent-Type: text/plain\n\n\n--B\n'
             b'Content-Type: text/plain; charset="koi8-r"\n\n\n--B--\n')

    with pytest.raises(IngestionRejected) as refused:
        _mail(empty)

    assert refused.value.reason == "no_text"


@pytest.mark.parametrize("declared", [b"multipart/alternative;",
                                      b'multipart/mixed; boundary="never-used"'],
                         ids=["no-boundary", "unused-boundary"])
def test_a_multipart_message_without_a_usable_boundary_keeps_its_words(declared: bytes) -> None:
    broken = (b"From: a@example.org\nSubject: 64423\nMIME-Version: 1.0\n"
              b"Content-Type: " + declared + b"\n\nBlah blah blah\n")

    done = _mail(broken)

    assert "Blah blah blah" in done.text
    assert any("no boundary" in note for note in done.notes)
