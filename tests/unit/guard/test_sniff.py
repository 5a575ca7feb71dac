"""`sniff` names a kind from the bytes alone; `resolve_kind` checks a declared type against it."""

from __future__ import annotations

import codecs

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import EXTRACTABLE_KINDS, sniff
from capsa.guard.samples import build_zip, ooxml_skeleton, pdf_with_text, zip_of
from capsa.guard.sniff import kind_for_media_type, media_type_for_name, resolve_kind

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (b"%PDF-1.7\n%...", "pdf"),
        (PNG, "png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "jpeg"),
        (b"II*\x00\x08\x00\x00\x00", "tiff"),
        (b"MM\x00*\x00\x00\x00\x08", "tiff"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "webp"),
        (b"GIF89a\x01\x00\x01\x00", "gif"),
        (b"GIF87a\x01\x00\x01\x00", "gif"),
        (b"{\\rtf1\\ansi hello}", "rtf"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 8, "ole"),
        (b"%!PS-Adobe-3.0 EPSF-3.0\n", "postscript"),
        (b"\xc5\xd0\xd3\xc6" + b"\x00" * 12, "postscript"),
    ],
)
def test_sniff_names_binary_formats_by_their_magic_bytes(payload: bytes, kind: str) -> None:
    assert sniff(payload) == kind


def test_sniff_ignores_riff_containers_that_are_not_webp() -> None:
    assert sniff(b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 20) == "binary"


@pytest.mark.parametrize(
    ("main_part", "kind"),
    [("word/document.xml", "docx"), ("ppt/presentation.xml", "pptx"),
     ("xl/workbook.xml", "xlsx")],
)
def test_sniff_tells_ooxml_kinds_apart_by_their_central_directory(main_part: str,
                                                                   kind: str) -> None:
    assert sniff(ooxml_skeleton(main_part)) == kind


def test_sniff_needs_the_content_types_part_to_call_a_zip_ooxml_skeleton() -> None:
    assert sniff(zip_of({"word/document.xml": b"<doc/>"})) == "zip"


def test_sniff_matches_ooxml_part_names_case_insensitively() -> None:
    assert sniff(zip_of({"[content_types].xml": b"<T/>", "Word/Document.xml": b"<d/>"})) == "docx"


def test_sniff_recognises_epub_by_its_stored_mimetype_member() -> None:
    payload = zip_of({"mimetype": b"application/epub+zip", "content.opf": b"<p/>"}, stored=True)

    assert sniff(payload) == "epub"


def test_sniff_calls_an_ordinary_archive_zip() -> None:
    assert sniff(zip_of({"a.txt": b"hello"})) == "zip"


def test_sniff_calls_an_empty_archive_zip() -> None:
    assert sniff(build_zip([])) == "zip"


def test_sniff_calls_an_unreadable_zip_zip_and_leaves_the_reason_to_archive_inspection() -> None:
    assert sniff(b"PK\x03\x04" + b"\x00" * 40) == "zip"


def test_sniff_routes_a_pdf_zip_polyglot_by_its_leading_magic() -> None:
    assert sniff(pdf_with_text(["hello"]) + zip_of({"a.txt": b"x"})) == "pdf"


@pytest.mark.parametrize(
    "payload",
    [
        b"<!DOCTYPE html><html><body>x</body></html>",
        b"<html><body>x</body></html>",
        b"  \n<HTML lang='en'>",
        b"<?xml version='1.0'?>\n<html xmlns='http://www.w3.org/1999/xhtml'>",
        codecs.BOM_UTF8 + b"<!doctype html>",
    ],
)
def test_sniff_recognises_html_from_its_opening(payload: bytes) -> None:
    assert sniff(payload) == "html"


def test_sniff_calls_other_xml_text() -> None:
    assert sniff(b"<?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'/>") == "text"


def test_sniff_does_not_call_html_that_only_appears_later_in_the_text() -> None:
    assert sniff(b"Notes about the <html> element.") == "text"


def test_sniff_recognises_email_from_two_known_header_lines() -> None:
    payload = b"From: a@example.com\nTo: b@example.com\nSubject: hi\n\nbody\n"

    assert sniff(payload) == "eml"


def test_sniff_keeps_one_header_like_line_as_text() -> None:
    assert sniff(b"Subject: minutes of the meeting\n\nWe met.\n") == "text"


def test_sniff_keeps_unknown_header_like_lines_as_text() -> None:
    assert sniff(b"Name: value\nOther: thing\n\nbody") == "text"


@pytest.mark.parametrize(
    "payload",
    [b"plain words", b"# heading\n\n- item", b"a,b\n1,2\n", b'{"k": [1, 2]}', b""],
)
def test_sniff_calls_markdown_csv_and_json_text(payload: bytes) -> None:
    assert sniff(payload) == "text"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_sniff_calls_utf16_text_text(encoding: str) -> None:
    assert sniff("hello, wide world".encode(encoding)) == "text"


@pytest.mark.parametrize(
    "payload",
    [b"\x00" * 64, b"\x7fELF\x02\x01\x01" + b"\x00" * 57, b"MZ\x90\x00" + b"\x00" * 60],
)
def test_sniff_calls_non_text_binary(payload: bytes) -> None:
    assert sniff(payload) == "binary"


def test_sniff_calls_text_with_a_stray_nul_byte_text() -> None:
    # One NUL in 244 bytes: under 1 %, and normalisation strips it.
    assert sniff(b"Northwind Harbor notes. " * 10 + b"\x00end") == "text"


def test_sniff_calls_bytes_with_nuls_that_are_neither_stray_nor_utf16_binary() -> None:
    assert sniff(b"abc\x00def" * 3) == "binary"


def test_sniff_calls_nul_free_undecodable_bytes_text_for_the_plain_extractor_to_refuse() -> None:
    assert sniff(bytes(range(128, 256)) * 4) == "text"


@pytest.mark.parametrize(
    ("media_type", "kind"),
    [
        ("application/pdf", "pdf"),
        ("APPLICATION/PDF", "pdf"),
        ("text/plain; charset=utf-8", "text"),
        ("image/jpg", "jpeg"),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"),
        ("application/octet-stream", None),
        ("", None),
        (None, None),
        ("application/x-unknown", None),
    ],
)
def test_kind_for_media_type_reads_only_the_base_type(media_type: str | None,
                                                      kind: str | None) -> None:
    assert kind_for_media_type(media_type) == kind


def test_resolve_kind_keeps_the_sniffed_kind_when_nothing_is_declared() -> None:
    assert resolve_kind("pdf", None, label="a.pdf") == "pdf"


def test_resolve_kind_refuses_a_declared_type_that_contradicts_the_bytes() -> None:
    with pytest.raises(IngestionRejected) as caught:
        resolve_kind("png", "application/pdf", label="report.pdf")

    error = caught.value
    assert (error.label, error.stage, error.reason) == ("report.pdf", "sniff", "type_mismatch")
    assert "'application/pdf'" in error.detail
    assert "png" in error.detail


def test_resolve_kind_lets_the_bytes_win_when_told_to_trust_them() -> None:
    assert resolve_kind("png", "application/pdf", label="report.pdf", trust_bytes=True) == "png"


@pytest.mark.parametrize(
    ("sniffed", "declared", "kind"),
    [
        ("text", "text/markdown", "markdown"),
        ("text", "text/csv", "csv"),
        ("text", "application/json", "json"),
        ("html", "text/plain", "text"),
        ("eml", "text/plain", "text"),
        ("text", "text/html", "html"),
        ("text", "message/rfc822", "eml"),
    ],
)
def test_resolve_kind_lets_a_declared_type_refine_within_the_text_family(
    sniffed: str, declared: str, kind: str
) -> None:
    assert resolve_kind(sniffed, declared, label="a") == kind  # type: ignore[arg-type]


def test_resolve_kind_lets_the_sniffed_image_format_win_over_a_declared_one() -> None:
    assert resolve_kind("jpeg", "image/png", label="photo.png") == "jpeg"


def test_resolve_kind_never_upgrades_text_to_a_binary_format() -> None:
    with pytest.raises(IngestionRejected, match="contradicts"):
        resolve_kind("text", "application/pdf", label="a.pdf")


@pytest.mark.parametrize("kind", ["zip", "gif", "ole", "postscript", "binary"])
def test_resolve_kind_refuses_kinds_capsa_does_not_extract(kind: str) -> None:
    with pytest.raises(IngestionRejected) as caught:
        resolve_kind(kind, None, label="x")  # type: ignore[arg-type]

    assert (caught.value.stage, caught.value.reason) == ("sniff", "unsupported_type")
    assert kind in caught.value.detail


def test_resolve_kind_refuses_an_unsupported_kind_even_when_trusting_bytes() -> None:
    with pytest.raises(IngestionRejected, match="gif"):
        resolve_kind("gif", "image/png", label="x.png", trust_bytes=True)


def test_extractable_kinds_excludes_containers_and_unknowns() -> None:
    assert {"zip", "ole", "postscript", "gif", "binary"}.isdisjoint(EXTRACTABLE_KINDS)
    assert {"pdf", "docx", "png", "text", "html", "eml"} <= EXTRACTABLE_KINDS


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("invoice.PDF", "application/pdf"),
        ("notes.md", "text/markdown"),
        ("scan.JPG", "image/jpeg"),
        ("../../etc/passwd.txt", "text/plain"),
        ("figure.eps", "application/postscript"),
        ("README", None),
        ("archive.tar.gz", None),
        ("trailing.", None),
    ],
)
def test_media_type_for_name_reads_only_the_last_extension(name: str,
                                                           media_type: str | None) -> None:
    assert media_type_for_name(name) == media_type


@pytest.mark.parametrize(("payload", "says"), [
    (zip_of({"notes.txt": b"a plain archive"}), "OpenDocument"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504, ".doc"),
    (b"%!PS-Adobe-3.0\n", "convert it to PDF"),
    (b"GIF89a" + b"\x00" * 10, "PNG"),
])
def test_a_refused_kind_is_named_as_a_user_knows_it_with_what_to_do(payload: bytes,
                                                                     says: str) -> None:
    # "content is ole" tells a user with a .doc nothing; the refusal names the
    # file type they know and a format capsa reads.
    with pytest.raises(IngestionRejected) as caught:
        resolve_kind(sniff(payload), None, label="upload")
    assert caught.value.reason == "unsupported_type"
    assert says in caught.value.detail
    assert "supported: csv" in caught.value.detail
