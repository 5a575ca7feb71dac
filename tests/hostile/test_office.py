"""Legacy Office, OpenDocument and Outlook files through the production pool: the real
fixtures extract, and their hostile variants (macros, bombs inside the container,
conversions that hang or balloon) end in typed outcomes naming the file and the limit.

The LibreOffice tests need ``soffice`` (``make test`` installs it through the
Makefile's ``system-deps``); without it they are skipped, and the missing-extra
test below shows what a user sees instead.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hostile._cfb import outlook_message

from capsa.errors import ExtractionFailed, IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    extract_all,
    extract_attachment,
)
from capsa.guard.extractors import OfficeExtractor, Router
from capsa.guard.limits import INGESTION_LIMITS
from capsa.guard.sniff import media_type_for_name

LEGACY = Path(__file__).resolve().parents[1] / "realdocs" / "files" / "legacy"
MiB = 1024 * 1024
LIMITS = ExtractionLimits(timeout_s=120, cpu_s=120)
"""Attachment limits but for time: a LibreOffice start on a busy shared machine is slow."""

needs_soffice = pytest.mark.skipif(shutil.which("soffice") is None,
                                   reason="LibreOffice is not installed (make system-deps)")


@pytest.fixture(scope="module")
def office_pool() -> Iterator[IsolatedExtractor]:
    """A pool of the office router alone: it starts in a second, and its children are the
    production children (the same sandbox, filter and limits)."""
    with IsolatedExtractor(Router([OfficeExtractor()]), workers=1) as pool:
        yield pool


def _attachment(name: str, payload: bytes | None = None) -> Attachment:
    data = payload if payload is not None else (LEGACY / name).read_bytes()
    return Attachment(label=name, media_type=media_type_for_name(name), payload=data)


@needs_soffice
@pytest.mark.parametrize(("name", "kind", "words", "tool"), [
    ("report.doc", "doc", "Harbour Operations Report", "LibreOffice"),
    ("berths.xls", "xls", "North\t142\t1200000", "LibreOffice"),
    ("slides.ppt", "ppt", "Northwind Port Authority", "LibreOffice"),
    ("report.odt", "odt", "Harbour Operations Report", "pandoc"),
    ("berths.ods", "ods", "South\t97\t830000", "LibreOffice"),
    ("slides.odp", "odp", "Northwind Port Authority", "LibreOffice"),
])
def test_office_files_convert_inside_the_sandbox_and_say_how(
        office_pool: IsolatedExtractor, name: str, kind: str, words: str, tool: str) -> None:
    done = extract_attachment(_attachment(name), office_pool, LIMITS)

    assert done.kind == kind
    assert words in done.text
    assert done.notes[0].startswith(f"converted from {kind.upper()} to ")
    assert f"by {tool}" in done.notes[0]


def test_an_outlook_message_and_its_attachments_go_through_the_guard(
        real_pool: IsolatedExtractor) -> None:
    result = extract_all([_attachment("berth-schedule.msg")], real_pool, LIMITS)

    labels = {item.label: item for item in result.extracted}
    assert set(labels) == {"berth-schedule.msg", "berth-schedule.msg/berths.csv",
                           "berth-schedule.msg/report.docx"}
    message = labels["berth-schedule.msg"]
    assert message.kind == "msg"
    assert "Subject: Berth schedule" in message.text
    assert message.mail is not None and message.mail.subject == "Berth schedule"
    assert message.elements  # structure, as every other kind has
    assert "The north berth opens on Monday." in message.text
    assert "- report.docx (" in message.text  # the parent lists what it carried
    assert labels["berth-schedule.msg/report.docx"].parent == "berth-schedule.msg"
    assert "Harbour Operations Report" in labels["berth-schedule.msg/report.docx"].text
    assert result.omitted == ()


def test_an_outlook_attachment_is_refused_on_its_own_and_the_message_still_arrives(
        real_pool: IsolatedExtractor) -> None:
    payload = outlook_message("Invoice", "See the invoice.", "billing@example.org",
                              [("invoice.pdf", "application/pdf", b"\x89PNG\r\n\x1a\n....")])

    result = extract_all([_attachment("invoice.msg", payload)], real_pool, LIMITS)

    assert [item.label for item in result.extracted] == ["invoice.msg"]
    assert [(o.label, o.parent, o.reason) for o in result.omitted] == [
        ("invoice.msg/invoice.pdf", "invoice.msg", "type_mismatch")]


def test_a_docx_named_doc_is_extracted_as_docx_under_the_ingestion_preset(
        real_pool: IsolatedExtractor) -> None:
    ingestion = INGESTION_LIMITS.model_copy(update={"timeout_s": 120.0, "cpu_s": 120})

    done = extract_attachment(_attachment("docx-named.doc"), real_pool, ingestion)

    assert done.kind == "docx"
    assert "declared 'application/msword' (doc) but the bytes are docx" in done.notes[0]


# ------------------------------------------------------------------------ macros


def _macro_ods(marker: Path) -> bytes:
    """A spreadsheet whose Basic macro is bound to the document's load event and would
    write `marker`."""
    events = "".join(
        f'<script:event-listener script:language="ooo:script" script:event-name="{event}" '
        'xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;'
        'location=document" xlink:type="simple"/>'
        for event in ("dom:load", "office:load-finished"))
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:script="urn:oasis:names:tc:opendocument:xmlns:script:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" '
        'xmlns:dom="http://www.w3.org/2001/xml-events" office:version="1.2">'
        f"<office:scripts><office:event-listeners>{events}</office:event-listeners>"
        "</office:scripts><office:body><office:spreadsheet><table:table table:name=\"S\">"
        "<table:table-row><table:table-cell office:value-type=\"string\">"
        "<text:p>capsa macro sample</text:p></table:table-cell></table:table-row>"
        "</table:table></office:spreadsheet></office:body></office:document-content>")
    module = (
        '<?xml version="1.0" encoding="UTF-8"?><script:module '
        'xmlns:script="http://openoffice.org/2000/script" script:name="Module1" '
        f'script:language="StarBasic">Sub Main\n  Open &quot;{marker}&quot; For Output As #1\n'
        '  Print #1, &quot;macro ran&quot;\n  Close #1\nEnd Sub\n</script:module>')
    library = (
        '<?xml version="1.0" encoding="UTF-8"?><library:library '
        'xmlns:library="http://openoffice.org/2000/library" library:name="Standard" '
        'library:readonly="false" library:passwordprotected="false">'
        '<library:element library:name="Module1"/></library:library>')
    libraries = (
        '<?xml version="1.0" encoding="UTF-8"?><library:libraries '
        'xmlns:library="http://openoffice.org/2000/library" '
        'xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<library:library library:name="Standard" library:link="false"/></library:libraries>')
    parts = {"content.xml": content, "Basic/script-lc.xml": libraries,
             "Basic/Standard/script-lb.xml": library, "Basic/Standard/Module1.xml": module}
    manifest = "".join(f'<manifest:file-entry manifest:full-path="{name}" '
                       'manifest:media-type="text/xml"/>' for name in parts)
    parts["META-INF/manifest.xml"] = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" '
        'manifest:version="1.2"><manifest:file-entry manifest:full-path="/" '
        'manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
        f"{manifest}</manifest:manifest>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"),
                         "application/vnd.oasis.opendocument.spreadsheet")
        for name, text in parts.items():
            archive.writestr(name, text, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


@needs_soffice
def test_an_auto_run_macro_never_runs_during_conversion(tmp_path: Path) -> None:
    # In this process, with no sandbox: only capsa's profile (macros disabled) stands
    # between the load event and the marker file, which the macro could write here.
    marker = tmp_path / "macro-ran.txt"
    payload = _macro_ods(marker)

    parsed = OfficeExtractor(LIMITS).extract("ods", None, payload, max_pages=5)

    text = parsed if isinstance(parsed, str) else parsed.text
    assert "capsa macro sample" in text
    assert not marker.exists()


@needs_soffice
def test_an_auto_run_macro_never_runs_in_the_pool(office_pool: IsolatedExtractor,
                                                  tmp_path: Path) -> None:
    marker = tmp_path / "macro-ran.txt"

    done = extract_attachment(_attachment("macro.ods", _macro_ods(marker)), office_pool, LIMITS)

    assert "capsa macro sample" in done.text
    assert not marker.exists()


# ---------------------------------------------------------- bombs inside the container


def _ods(content: bytes, *, extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"),
                         "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        for name, data in (extra or {}).items():
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def test_an_opendocument_zip_bomb_is_refused_before_any_converter(
        office_pool: IsolatedExtractor) -> None:
    bomb = _ods(b"<office:document-content/>" + b" " * (64 * MiB))

    with pytest.raises(IngestionRejected) as caught:
        extract_attachment(_attachment("bomb.ods", bomb), office_pool, LIMITS)
    assert (caught.value.label, caught.value.stage) == ("bomb.ods", "archive")
    assert caught.value.reason in {"archive_ratio", "archive_too_large"}


def test_an_opendocument_entity_declaration_is_refused_before_any_converter(
        office_pool: IsolatedExtractor) -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
              b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><office:document-content>&b;'
              b"</office:document-content>")

    with pytest.raises(IngestionRejected) as caught:
        extract_attachment(_attachment("laughs.ods", _ods(laughs)), office_pool, LIMITS)
    assert (caught.value.label, caught.value.reason) == ("laughs.ods", "forbidden_xml")


def test_an_ole_stream_that_claims_more_than_the_file_is_refused_before_libreoffice(
        office_pool: IsolatedExtractor) -> None:
    payload = bytearray((LEGACY / "report.doc").read_bytes())
    directory = payload.index("WordDocument".encode("utf-16-le"))
    payload[directory + 120:directory + 128] = (0xFFFFFF00).to_bytes(8, "little")  # 4 GiB

    with pytest.raises(IngestionRejected) as caught:
        extract_attachment(_attachment("bomb.doc", bytes(payload)), office_pool, LIMITS)
    assert (caught.value.label, caught.value.stage, caught.value.reason) == (
        "bomb.doc", "archive", "corrupt")


# ----------------------------------------------------- conversions that hang or balloon


@needs_soffice
def test_a_conversion_past_the_wall_clock_ends_as_a_timeout_naming_the_limit(
        office_pool: IsolatedExtractor) -> None:
    short = LIMITS.model_copy(update={"timeout_s": 1.0, "cpu_s": 2})

    with pytest.raises(ExtractionFailed) as caught:
        extract_attachment(_attachment("slides.ppt"), office_pool, short)
    assert (caught.value.label, caught.value.cause) == ("slides.ppt", "timeout")
    assert "timeout_s" in caught.value.detail


@needs_soffice
def test_a_conversion_past_the_memory_allowance_ends_as_a_memory_failure(
        office_pool: IsolatedExtractor) -> None:
    small = LIMITS.model_copy(update={"memory_bytes": 96 * MiB})

    with pytest.raises(ExtractionFailed) as caught:
        extract_attachment(_attachment("slides.ppt"), office_pool, small)
    assert (caught.value.label, caught.value.cause) == ("slides.ppt", "memory_limit")
    assert "memory_bytes" in caught.value.detail


@needs_soffice
def test_the_pool_serves_the_next_office_file_after_a_failure(
        office_pool: IsolatedExtractor) -> None:
    with pytest.raises(ExtractionFailed):
        extract_attachment(_attachment("berths.xls"), office_pool,
                           LIMITS.model_copy(update={"timeout_s": 0.5, "cpu_s": 1}))

    done = extract_attachment(_attachment("berths.xls"), office_pool, LIMITS)

    assert isinstance(done, Extracted)
    assert "East\t211" in done.text


# ------------------------------------------------------------------ a missing install


def test_a_machine_without_libreoffice_refuses_the_file_as_a_missing_extra() -> None:
    # A PATH with no soffice: the self-test says so, and the pool refuses the kind
    # with the packages to install instead of reporting a crash.
    with IsolatedExtractor(Router([OfficeExtractor(path="/nonexistent")]), workers=1) as pool:
        with pytest.raises(IngestionRejected) as caught:
            extract_attachment(_attachment("berths.xls"), pool, LIMITS)
        status = pool.health["self_test"]["xls"]

    assert (caught.value.label, caught.value.stage, caught.value.reason) == (
        "berths.xls", "parser", "missing_extra")
    assert "apt-get install --no-install-recommends libreoffice-writer-nogui" in (
        caught.value.detail)
    assert status.startswith("missing_extra: ")
