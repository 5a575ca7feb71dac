"""One archive, one truth: the zip the guard inspects is the zip every parser reads.

`zipfile` reads every central-directory entry inside the directory's declared
size and prefers a zip64 end record whenever a locator precedes the classic
one. Each trick below hides an entry, or a whole directory, from a reader
that trusts a different record; each is built in code and each must be
refused at stage ``archive`` before any member is inflated, in the
application (the plain pool never sees it) and again in the worker.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, IsolatedExtractor, inspect_archive
from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.samples import (
    MiB,
    ZipEntry,
    build_zip,
    docx_members,
    paragraphs_xml,
    zeros_member,
    zip_counting,
    zip_end_patched,
    zip_of,
    zip_with_zip64_end,
)

from .conftest import (
    LIMITS,
    assert_omitted,
    run_among_good,
)

_HIDDEN_TEXT = "what only zipfile would show"


def _docx_hiding_its_document() -> bytes:
    members = docx_members(paragraphs_xml([_HIDDEN_TEXT]))
    shown = [m for m in members if m.name != "word/document.xml"]
    hidden = [m for m in members if m.name == "word/document.xml"]
    return zip_counting(shown + hidden, counted=len(shown))


def _docx_hiding_a_bomb() -> bytes:
    members = docx_members(paragraphs_xml(["Northwind Harbor memo"]))
    return zip_counting([*members, zeros_member("word/media/zeros.bin", 320 * MiB)],
                        counted=len(members))


def _refused(label: str, payload: bytes, pool: IsolatedExtractor) -> str:
    outcome = run_among_good(pool, Attachment(label=label, payload=payload))
    return assert_omitted(outcome, stage="archive", reason="header_mismatch").detail


def test_end_record_understating_the_count_cannot_hide_the_document(
        plain_pool: IsolatedExtractor) -> None:
    payload = _docx_hiding_its_document()
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:  # the trick is real
        assert "word/document.xml" in archive.namelist()
    detail = _refused("hidden.docx", payload, plain_pool)
    assert "hidden from the count" in detail


def test_hidden_320_mib_member_is_refused_before_any_inflation(
        plain_pool: IsolatedExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _docx_hiding_a_bomb()
    assert len(payload) < 400 * 1024  # about 327 KB, a thousand times smaller than it inflates
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        assert archive.getinfo("word/media/zeros.bin").file_size == 320 * MiB
    _refused("bomb.docx", payload, plain_pool)

    # The worker inspects again and reads members only through the inspected
    # view: called directly, the extractor refuses before zipfile inflates a byte.
    def no_inflation(*args: object, **kwargs: object) -> None:
        raise AssertionError("a member was inflated")

    monkeypatch.setattr(zipfile, "_get_decompressor", no_inflation)
    with pytest.raises(IngestionRejected) as refused:
        UnstructuredExtractor().extract("docx", None, payload, max_pages=20)
    assert (refused.value.stage, refused.value.reason) == ("archive", "header_mismatch")


def test_zip64_record_that_disagrees_with_the_classic_one_is_refused(
        plain_pool: IsolatedExtractor) -> None:
    honest = build_zip(docx_members(paragraphs_xml(["Northwind Harbor memo"])))
    payload = zip_with_zip64_end(honest, count=2)  # classic says 3, zip64 says 2
    detail = _refused("zip64.docx", payload, plain_pool)
    assert "entry count (3) disagrees with the zip64 record's (2)" in detail


def test_honest_zip64_end_records_pass_the_archive_stage(plain_pool: IsolatedExtractor) -> None:
    # The marker in the classic record, the truth in the zip64 one: judged sound,
    # then refused only because a bare zip is not a kind capsa extracts.
    payload = zip_with_zip64_end(zip_of({"a.txt": b"alpha", "b.txt": b"beta"}),
                                 mark_classic=True)
    inspect_archive(payload, LIMITS, label="zip64.zip")
    outcome = run_among_good(plain_pool, Attachment(label="zip64.zip", payload=payload))
    assert_omitted(outcome, stage="sniff", reason="unsupported_type")


@pytest.mark.parametrize("delta", [-46, -1, 1, 22])
def test_directory_size_that_disagrees_with_the_end_record_is_refused(
        plain_pool: IsolatedExtractor, delta: int) -> None:
    honest = build_zip([ZipEntry("a.txt", b"alpha"), ZipEntry("b.txt", b"beta")])
    size = honest[-22:][12:16]
    payload = zip_end_patched(honest, directory_size=int.from_bytes(size, "little") + delta)
    assert "central directory is declared at offset" in _refused("sized.zip", payload, plain_pool)
