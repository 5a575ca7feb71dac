"""Office formats before any converter: sniffing, the compound-file inspection, the
name-versus-bytes policy, the LibreOffice child's seccomp filter, and readiness."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.hostile._cfb import SECTOR, compound_file, outlook_message

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, ExtractionLimits, extract_attachment
from capsa.guard.archive import OleDirectory, inspect_ole, read_ole_directory
from capsa.guard.extractors import OfficeExtractor, TesseractExtractor, UnstructuredExtractor
from capsa.guard.extractors import tesseract as tesseract_module
from capsa.guard.limits import ATTACHMENT_LIMITS, INGESTION_LIMITS
from capsa.guard.sandbox import doctor, seccomp
from capsa.guard.sniff import (
    bytes_over_name,
    kind_for_media_type,
    media_type_for_name,
    resolve_kind,
    sniff,
)

LEGACY = Path(__file__).resolve().parents[2] / "realdocs" / "files" / "legacy"
DOCX = (LEGACY / "docx-named.doc").read_bytes()


@pytest.mark.parametrize(("name", "kind"), [
    ("report.doc", "doc"), ("berths.xls", "xls"), ("slides.ppt", "ppt"),
    ("berth-schedule.msg", "msg"), ("report.odt", "odt"), ("berths.ods", "ods"),
    ("slides.odp", "odp"), ("docx-named.doc", "docx"),
])
def test_sniff_tells_office_files_apart_by_their_streams_and_members(name: str,
                                                                     kind: str) -> None:
    assert sniff((LEGACY / name).read_bytes()) == kind


@pytest.mark.parametrize(("name", "kind"), [
    ("a.doc", "doc"), ("a.XLS", "xls"), ("a.ppt", "ppt"), ("a.msg", "msg"), ("a.odt", "odt"),
    ("a.ods", "ods"), ("a.odp", "odp"),
])
def test_an_office_extension_declares_its_own_kind(name: str, kind: str) -> None:
    assert kind_for_media_type(media_type_for_name(name)) == kind


def test_a_compound_file_without_an_application_stream_stays_ole_and_is_refused() -> None:
    payload = compound_file({("Contents",): b"nothing an office writes at its root"})

    assert sniff(payload) == "ole"
    with pytest.raises(IngestionRejected) as caught:
        resolve_kind("ole", None, label="blob.bin")
    assert caught.value.reason == "unsupported_type"


def test_an_encrypted_office_package_sniffs_as_ole_not_as_its_inner_kind() -> None:
    payload = compound_file({("EncryptionInfo",): b"\x04\x00" * 8,
                             ("EncryptedPackage",): b"\x00" * 64})

    assert sniff(payload) == "ole"


def test_read_ole_directory_names_the_root_streams_of_a_message() -> None:
    payload = outlook_message("Subject", "Body", "a@example.org", [("n.txt", "text/plain", b"n")])

    directory = read_ole_directory(payload)

    assert "__properties_version1.0" in directory.top
    assert "__attach_version1.0_#00000000" in directory.top
    assert "__substg1.0_37010102" not in directory.top  # inside the attachment's storage


def _with_fat(payload: bytes, sector_index: int, value: int) -> bytes:
    """`payload` with one allocation-table entry rewritten (the first FAT sector)."""
    first_fat = struct.unpack_from("<I", payload, 0x4C)[0]
    at = (first_fat + 1) * SECTOR + 4 * sector_index
    return payload[:at] + struct.pack("<I", value) + payload[at + 4:]


def _big_stream_file() -> tuple[bytes, int]:
    payload = compound_file({("WordDocument",): b"w" * 9000})
    start = read_start(payload, "WordDocument")
    return payload, start


def read_start(payload: bytes, name: str) -> int:
    dir_start = struct.unpack_from("<I", payload, 0x30)[0]
    base = (dir_start + 1) * SECTOR
    for index in range(SECTOR // 128):
        entry = payload[base + index * 128:base + (index + 1) * 128]
        length = struct.unpack_from("<H", entry, 64)[0]
        if entry[:max(length - 2, 0)].decode("utf-16-le") == name:
            return int(struct.unpack_from("<I", entry, 116)[0])
    raise AssertionError(name)


def test_a_chain_that_loops_is_refused_as_corrupt_before_any_reader() -> None:
    payload, start = _big_stream_file()
    looped = _with_fat(payload, start + 2, start)  # the third sector points back at the first

    with pytest.raises(IngestionRejected) as caught:
        inspect_ole(looped, ATTACHMENT_LIMITS, label="loop.doc")
    assert (caught.value.label, caught.value.stage, caught.value.reason) == (
        "loop.doc", "archive", "corrupt")
    assert "loop" in caught.value.detail


def test_a_chain_that_points_outside_the_file_is_refused() -> None:
    payload, start = _big_stream_file()
    outside = _with_fat(payload, start, 0x00FFFFFF)

    with pytest.raises(IngestionRejected) as caught:
        inspect_ole(outside, ATTACHMENT_LIMITS, label="far.doc")
    assert caught.value.reason == "corrupt"
    assert "outside the file" in caught.value.detail


def test_two_streams_sharing_sectors_are_refused_as_overlapping() -> None:
    payload = compound_file({("WordDocument",): b"w" * 5000, ("1Table",): b"t" * 5000})
    dir_start = struct.unpack_from("<I", payload, 0x30)[0]
    base = (dir_start + 1) * SECTOR
    at = next(base + index * 128 for index in range(SECTOR // 128)
              if payload[base + index * 128:][:12] == "1Table".encode("utf-16-le"))
    # 1Table's directory entry now starts at WordDocument's first sector
    shared = (payload[:at + 116] + struct.pack("<I", read_start(payload, "WordDocument"))
              + payload[at + 120:])

    with pytest.raises(IngestionRejected) as caught:
        inspect_ole(shared, ATTACHMENT_LIMITS, label="twice.doc")
    assert caught.value.reason == "overlapping_members"


def test_a_stream_declaring_more_bytes_than_the_file_holds_is_refused() -> None:
    payload = compound_file({("WordDocument",): b"w" * 100})
    dir_start = struct.unpack_from("<I", payload, 0x30)[0]
    at = (dir_start + 1) * SECTOR + 128 + 120  # entry 1's size
    lying = payload[:at] + struct.pack("<Q", 0xFFFFFFF0) + payload[at + 8:]

    with pytest.raises(IngestionRejected) as caught:
        inspect_ole(lying, ATTACHMENT_LIMITS, label="huge.doc")
    assert caught.value.reason == "corrupt"
    assert "4294967280 bytes" in caught.value.detail


def test_more_streams_than_max_members_are_refused_from_the_directory() -> None:
    payload = compound_file({(f"S{n}",): b"x" for n in range(40)})

    with pytest.raises(IngestionRejected) as caught:
        inspect_ole(payload, ExtractionLimits(max_members=16), label="many.doc")
    assert (caught.value.stage, caught.value.reason) == ("archive", "too_many_members")
    assert "40 storages and streams, over the limit of 16" in caught.value.detail


def test_streams_over_max_uncompressed_bytes_are_refused() -> None:
    payload = compound_file({("WordDocument",): b"w" * 20_000})

    with pytest.raises(IngestionRejected) as caught:
        inspect_ole(payload, ExtractionLimits(max_uncompressed_bytes=10_000), label="big.doc")
    assert caught.value.reason == "archive_too_large"
    assert "max_uncompressed_bytes" in caught.value.detail


def test_a_truncated_header_is_corrupt() -> None:
    with pytest.raises(IngestionRejected) as caught:
        read_ole_directory(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    assert caught.value.reason == "corrupt"


# ----------------------------------------------------------- the name versus the bytes


def test_the_ingestion_preset_extracts_a_docx_named_doc_and_says_so() -> None:
    attachment = Attachment(label="eng_spa_mult.doc", media_type=media_type_for_name("x.doc"),
                            payload=DOCX)

    done = extract_attachment(attachment, UnstructuredExtractor(), INGESTION_LIMITS)

    assert done.kind == "docx"
    assert "Harbour Operations Report" in done.text
    assert done.notes[0] == ("declared 'application/msword' (doc) but the bytes are docx; "
                             "extracted as docx")


def test_the_attachment_preset_still_refuses_a_docx_named_doc() -> None:
    attachment = Attachment(label="eng_spa_mult.doc", media_type="application/msword",
                            payload=DOCX)

    with pytest.raises(IngestionRejected) as caught:
        extract_attachment(attachment, UnstructuredExtractor(), ATTACHMENT_LIMITS)
    assert (caught.value.stage, caught.value.reason) == ("sniff", "type_mismatch")


@pytest.mark.parametrize(("sniffed", "declared"), [
    ("png", "application/pdf"),  # a picture under a document's name: a disguise
    ("text", "application/msword"),  # text under a document's name
    ("docx", "image/png"),  # a document under a picture's name
])
def test_trusting_document_bytes_still_refuses_pictures_and_text(sniffed: str,
                                                                 declared: str) -> None:
    with pytest.raises(IngestionRejected) as caught:
        resolve_kind(sniffed, declared, label="x", trust_documents=True)  # type: ignore[arg-type]
    assert caught.value.reason == "type_mismatch"


@pytest.mark.parametrize(("sniffed", "declared"), [
    ("docx", "application/msword"), ("rtf", "application/msword"),
    ("xlsx", "application/vnd.ms-excel"), ("doc", "application/pdf"),
])
def test_trusting_document_bytes_lets_a_document_overrule_another_documents_name(
        sniffed: str, declared: str) -> None:
    assert resolve_kind(sniffed, declared, label="x",  # type: ignore[arg-type]
                        trust_documents=True) == sniffed
    assert bytes_over_name(sniffed, declared) is not None


def test_a_refinement_within_a_family_gets_no_note() -> None:
    assert bytes_over_name("markdown", "text/markdown") is None
    assert bytes_over_name("jpeg", "image/png") is None
    assert bytes_over_name("csv", None) is None


def test_the_presets_choose_their_mismatch_policies() -> None:
    assert ATTACHMENT_LIMITS.on_type_mismatch == "refuse"
    assert INGESTION_LIMITS.on_type_mismatch == "trust_document_bytes"


# ------------------------------------------------------- the LibreOffice child's filter


def _probe(program: bytes) -> dict[str, str]:
    """In a forked child: install `program`, then make the socket calls LibreOffice makes."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the filtered child
        status = 70
        try:
            os.close(read_fd)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            numbers = seccomp._ARCHES[platform.machine()][1]
            seccomp.install(program, libc)

            def call(name: str, *args: object) -> str:
                ctypes.set_errno(0)
                result = libc.syscall(ctypes.c_long(numbers[name]), *args)
                return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

            long = ctypes.c_long
            unix = libc.syscall(long(numbers["socket"]), long(1), long(1), long(0))
            address = struct.pack("=H", 1) + b"\x00capsa-test-listen".ljust(106, b"\x00")
            nscd = struct.pack("=H", 1) + b"/var/run/nscd/socket".ljust(106, b"\x00")
            report = {
                "socket(AF_UNIX)": "ok" if unix >= 0 else "EPERM",
                "socket(AF_INET)": call("socket", long(2), long(1), long(0)),
                "bind": call("bind", long(unix), ctypes.c_char_p(address), long(110)),
                "listen": call("listen", long(unix), long(5)),
                "connect": call("connect", long(unix), ctypes.c_char_p(nscd), long(110)),
                "sendto": call("sendto", long(unix), None, long(0), long(0), None, long(0)),
                "shutdown": call("shutdown", long(unix), long(2)),
            }
            os.write(write_fd, json.dumps(report).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as stream:
        sent = stream.read()
    os.waitpid(pid, 0)
    answer: dict[str, str] = json.loads(sent)
    return answer


def test_only_the_libreoffice_filter_lets_a_child_listen_and_neither_lets_it_connect() -> None:
    if not seccomp.available():
        pytest.skip("no syscall table for this architecture")

    usual = _probe(seccomp.build_filter())
    office = _probe(seccomp.build_filter(unix_listen=True))

    assert usual["socket(AF_UNIX)"] == "EPERM"
    assert office == {"socket(AF_UNIX)": "ok", "socket(AF_INET)": "EPERM", "bind": "ok",
                      "listen": "ok", "connect": "EPERM", "sendto": "EPERM", "shutdown": "ok"}


def test_the_usual_filter_allows_nothing_it_allowed_before_the_office_kinds() -> None:
    added = seccomp.allowed(unix_listen=True) - seccomp.allowed()

    assert added == {"socket", "bind", "listen", "accept", "accept4", "shutdown"}
    assert not {"socket", "bind", "listen", "accept", "connect"} & seccomp.allowed()
    assert {"connect", "sendto", "sendmsg", "socketpair"} & seccomp.allowed(
        unix_listen=True) == set()


# ------------------------------------------------------------------- missing extras


def test_a_missing_tesseract_is_a_missing_extra_in_the_self_test(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name, path=None: None)

    report = TesseractExtractor().self_test()

    assert set(report) == {"png", "jpeg", "tiff", "webp"}
    assert all(status.startswith("missing_extra: install Tesseract")
               for status in report.values())
    assert tesseract_module._missing() is not None


def test_a_missing_soffice_is_a_missing_extra_in_the_self_test() -> None:
    report = OfficeExtractor(path="/nonexistent").self_test()

    assert report["doc"].startswith("missing_extra: install LibreOffice")
    assert "libreoffice-calc-nogui" in report["xls"]


def test_a_missing_soffice_refuses_the_file_as_missing_extra_in_process() -> None:
    extractor = OfficeExtractor(path="/nonexistent")

    with pytest.raises(IngestionRejected) as caught:
        extractor.extract("xls", None, (LEGACY / "berths.xls").read_bytes(), max_pages=5)
    assert (caught.value.stage, caught.value.reason) == ("parser", "missing_extra")
    assert "libreoffice-calc-nogui" in caught.value.detail


def test_doctor_names_what_to_install_for_each_missing_parser() -> None:
    readiness = doctor.parser_readiness(path="/nonexistent")

    assert readiness["text, markdown, csv, json"] == "ready"
    assert readiness["doc, xls, ppt, ods, odp (LibreOffice)"].startswith(
        "missing: install LibreOffice")
    assert "tesseract-ocr" in readiness["png, jpeg, tiff, webp, scanned PDF pages (OCR)"]
    assert "[MISSING] doc, xls, ppt, ods, odp (LibreOffice)" in doctor.render_parsers(readiness)


# ------------------------------------------------------------------------ invariants

_GOOD_OLE = outlook_message("Subject", "Body " * 300, "a@example.org",
                            [("n.txt", "text/plain", b"n" * 5000)])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_GOOD_OLE) - 1), st.integers(0, 255)),
                min_size=1, max_size=12),
       st.integers(512, len(_GOOD_OLE)))
def test_a_damaged_compound_file_is_read_or_refused_never_anything_else(
        flips: list[tuple[int, int]], keep: int) -> None:
    payload = bytearray(_GOOD_OLE)
    for offset, value in flips:
        payload[offset] = value
    damaged = bytes(payload[:keep])

    outcome = _inspected(damaged)

    if isinstance(outcome, IngestionRejected):
        assert outcome.stage == "archive"
        assert outcome.reason in {"corrupt", "overlapping_members", "too_many_members",
                                  "archive_too_large"}
    else:
        assert outcome.stream_bytes <= ATTACHMENT_LIMITS.max_uncompressed_bytes
        assert outcome.entries - 1 <= ATTACHMENT_LIMITS.max_members
    assert isinstance(sniff(damaged), str)  # sniffing a damaged file never raises


def _inspected(payload: bytes) -> OleDirectory | IngestionRejected:
    try:
        return inspect_ole(payload, ATTACHMENT_LIMITS, label="x.msg")
    except IngestionRejected as error:
        return error


def test_doctor_json_carries_the_parser_readiness(capsys: pytest.CaptureFixture[str]) -> None:
    status = doctor.main(["--json"])

    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["parsers"]["text, markdown, csv, json"] == "ready"
    assert set(report["parsers"]) == set(doctor.parser_readiness())
