"""C: containers and zip (C1–C12), judged from the central directory alone.

Every refusal here happens in the application process at stage ``archive``,
before any parser sees a byte, so the good neighbours go through the plain
pool; only C3 and C11, which reach a real parser, need the production pool.
"""

from __future__ import annotations

import io
import random
import zipfile

import pytest

from capsa.guard import Attachment, Extracted, IsolatedExtractor, Omission
from capsa.guard.samples import (
    SYMLINK_ATTR,
    MiB,
    ZipEntry,
    build_zip,
    docx_bytes,
    docx_document_xml,
    docx_lying_size,
    docx_with_main_part,
    paragraphs_xml,
    pdf_zip_polyglot,
    zip_declared_count,
    zip_many_members,
    zip_members,
    zip_nested,
    zip_of,
    zip_overlap_bomb,
    zip_ratio_bomb,
)

from .conftest import (
    LIMITS,
    PARSE_LIMITS,
    assert_omitted,
    good_for,
    run_among_good,
)


def _zip(label: str, payload: bytes, media_type: str | None = None) -> Attachment:
    return Attachment(label=label, media_type=media_type, payload=payload)


def test_c1_ratio_bomb_is_refused_for_its_expansion_ratio(plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, _zip("bomb.zip", zip_ratio_bomb(64 * MiB)))
    omission = assert_omitted(outcome, stage="archive", reason="archive_ratio")
    assert "67108864" in omission.detail  # the declared size it measured


def test_c2_overlap_bomb_is_refused_before_it_can_expand(plain_pool: IsolatedExtractor) -> None:
    # Fifield's 250-member bomb: every member declares its own view of the
    # same 1 MiB kernel, so the declared total alone is over the budget.
    outcome = run_among_good(plain_pool, _zip("overlap.zip", zip_overlap_bomb(250, MiB)))
    assert_omitted(outcome, stage="archive", reason="archive_too_large")


def test_c2_overlap_under_every_size_limit_is_refused_as_overlap(
        plain_pool: IsolatedExtractor) -> None:
    # A 1 KiB kernel keeps every size and ratio under its limit; only the
    # overlap itself gives the bomb away.
    outcome = run_among_good(plain_pool, _zip("overlap.zip", zip_overlap_bomb(250, 1024)))
    omission = assert_omitted(outcome, stage="archive", reason="overlapping_members")
    assert "zip bomb" in omission.detail


def test_c2_generator_builds_a_real_overlap_bomb() -> None:
    # The refusal above only means something if the bytes really are a bomb:
    # an unpatched zipfile inflates them far past their size, a patched one
    # (gh-109858) names the overlap. Either way, not a benign archive.
    bomb = zip_overlap_bomb(50, 64 * 1024)
    inflated, refusal = 0, ""
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:
        try:
            inflated = sum(len(archive.read(name)) for name in archive.namelist())
        except zipfile.BadZipFile as error:
            refusal = str(error)
    assert inflated > 50 * len(bomb) or "Overlapped" in refusal


@pytest.mark.slow
def test_c3_lying_member_size_yields_bounded_typed_failure(real_pool: IsolatedExtractor) -> None:
    # Headers declare 1 KiB; the data inflates to 16 MiB. zipfile stops at the
    # declared size and the CRC no longer matches: no reader gets 16 MiB.
    hostile = _zip("lying.docx", docx_lying_size(16 * MiB, 1024))
    outcome = run_among_good(real_pool, hostile, PARSE_LIMITS,
                             good=[good_for("docx"), good_for("text")],
                             next_file=good_for("docx"))
    # Typed and bounded is the bar (C3); which type is pinned by the CRC test
    # under C12, and this one accepts both until that gap closes.
    assert isinstance(outcome, Omission)
    assert (outcome.stage, outcome.reason) in {("parser", "raised"), ("preflight", "corrupt")}
    assert "CRC" in outcome.detail


def test_c4_member_declaring_4_gib_is_refused_unread(plain_pool: IsolatedExtractor) -> None:
    huge = build_zip([ZipEntry("huge.bin", b"hi", method=0, declared_size=0xFFFFFFFE)])
    outcome = run_among_good(plain_pool, _zip("huge.zip", huge))
    omission = assert_omitted(outcome, stage="archive", reason="archive_ratio")
    assert "4294967294" in omission.detail


def test_archive_budget_is_shared_across_nesting_levels(plain_pool: IsolatedExtractor) -> None:
    noise = random.Random(4).randbytes(600 * 1024)  # incompressible: no ratio to catch
    inner = zip_of({"inner.bin": noise}, stored=True)
    outer = zip_of({"a.bin": noise, "inner.zip": inner}, stored=True)
    limits = LIMITS.model_copy(update={"max_uncompressed_bytes": MiB + MiB // 2})
    outcome = run_among_good(plain_pool, _zip("nested.zip", outer), limits)
    assert_omitted(outcome, stage="archive", reason="archive_too_large")


@pytest.mark.parametrize("payload", [zip_many_members(2000), zip_declared_count(100_000)],
                         ids=["2000-real-members", "end-record-declaring-100000"])
def test_c5_member_count_is_refused_from_the_end_record(plain_pool: IsolatedExtractor,
                                                        payload: bytes) -> None:
    outcome = run_among_good(plain_pool, _zip("many.zip", payload))
    assert_omitted(outcome, stage="archive", reason="too_many_members")


@pytest.mark.parametrize("name", ["../../evil.txt", "/etc/passwd", "C:\\Windows\\evil.txt",
                                  "..\\..\\evil.txt", "docs/../../evil.txt"])
def test_c6_traversal_member_name_is_refused(plain_pool: IsolatedExtractor, name: str) -> None:
    payload = build_zip([ZipEntry("ok.txt", b"fine"), ZipEntry(name, b"escape")])
    outcome = run_among_good(plain_pool, _zip("traversal.zip", payload))
    assert_omitted(outcome, stage="archive", reason="unsafe_member_name")


def test_c6_symlink_member_is_refused(plain_pool: IsolatedExtractor) -> None:
    payload = build_zip([ZipEntry("link", b"/etc/passwd", method=0, external_attr=SYMLINK_ATTR)])
    outcome = run_among_good(plain_pool, _zip("link.zip", payload))
    omission = assert_omitted(outcome, stage="archive", reason="unsafe_member_name")
    assert "symbolic link" in omission.detail


@pytest.mark.parametrize("second_name", ["word/document.xml", "WORD/Document.xml"])
def test_c7_duplicate_document_part_is_refused(plain_pool: IsolatedExtractor,
                                                second_name: str) -> None:
    first = docx_bytes(paragraphs_xml(["what a streaming reader sees"]))
    payload = build_zip([*zip_members(first),
                         ZipEntry(second_name, b"<w:document>what python-docx sees</w:document>")])
    outcome = run_among_good(plain_pool, _zip("twice.docx", payload))
    assert_omitted(outcome, stage="archive", reason="duplicate_member")


def test_c8_deep_zip_in_zip_is_refused(plain_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(plain_pool, _zip("42.zip", zip_nested(30)))
    omission = assert_omitted(outcome, stage="archive", reason="nested_too_deep")
    assert "over the limit of 1" in omission.detail


def test_c8_one_level_of_nesting_passes_the_archive_stage(plain_pool: IsolatedExtractor) -> None:
    # Within the depth limit the archive is judged sound, and then refused
    # only because a bare zip is not a kind capsa extracts.
    outcome = run_among_good(plain_pool, _zip("outer.zip", zip_nested(2)))
    assert_omitted(outcome, stage="sniff", reason="unsupported_type")


def test_c8_nesting_limit_zero_refuses_any_inner_archive(plain_pool: IsolatedExtractor) -> None:
    limits = LIMITS.model_copy(update={"max_nesting_depth": 0})
    outcome = run_among_good(plain_pool, _zip("outer.zip", zip_nested(2)), limits)
    assert_omitted(outcome, stage="archive", reason="nested_too_deep")


def test_c9_encrypted_member_is_refused(plain_pool: IsolatedExtractor) -> None:
    payload = build_zip([ZipEntry("secret.txt", b"cipher", method=0, flags=0x1)])
    outcome = run_among_good(plain_pool, _zip("secret.zip", payload))
    assert_omitted(outcome, stage="archive", reason="encrypted")


def test_c10_aes_method_99_is_refused_as_encrypted(plain_pool: IsolatedExtractor) -> None:
    # Method 99 is WinZip AES: an encryption, which capsa names as such.
    payload = build_zip([ZipEntry("secret.txt", b"cipher", method=99)])
    outcome = run_among_good(plain_pool, _zip("aes.zip", payload))
    assert_omitted(outcome, stage="archive", reason="encrypted")


@pytest.mark.parametrize("method", [12, 14, 95])  # bzip2, LZMA, XZ
def test_c10_unknown_compression_method_is_refused(plain_pool: IsolatedExtractor,
                                                   method: int) -> None:
    payload = build_zip([ZipEntry("data.txt", b"packed", method=method)])
    outcome = run_among_good(plain_pool, _zip("odd.zip", payload))
    omission = assert_omitted(outcome, stage="archive", reason="unsupported_compression")
    assert f"method {method}" in omission.detail


@pytest.mark.slow
def test_c11_pdf_zip_polyglot_is_read_as_the_pdf_its_magic_says(
        real_pool: IsolatedExtractor) -> None:
    outcome = run_among_good(real_pool, _zip("polyglot.pdf", pdf_zip_polyglot()), PARSE_LIMITS,
                             good=[good_for("pdf"), good_for("text")], next_file=good_for("pdf"))
    assert isinstance(outcome, Extracted)
    assert outcome.kind == "pdf"
    assert "Northwind Harbor polyglot" in outcome.text


def test_c11_zip_with_a_prefix_is_not_treated_as_an_archive(
        plain_pool: IsolatedExtractor) -> None:
    prefixed = b"MZ" + bytes(64) + zip_ratio_bomb(2 * MiB)
    outcome = run_among_good(plain_pool, _zip("prefixed.bin", prefixed))
    assert_omitted(outcome, stage="sniff", reason="unsupported_type")


def test_c12_truncated_docx_is_refused_as_corrupt(plain_pool: IsolatedExtractor) -> None:
    whole = docx_bytes(paragraphs_xml(["cut short"]))
    outcome = run_among_good(plain_pool, _zip("cut.docx", whole[:-40]))
    assert_omitted(outcome, stage="archive", reason="corrupt")


@pytest.mark.slow
def test_c12_member_whose_crc_does_not_match_is_refused_as_corrupt(
        real_pool: IsolatedExtractor) -> None:
    document = docx_document_xml(paragraphs_xml(["Northwind Harbor memo"]))
    whole = docx_with_main_part(document, stored=True)
    damaged = whole.replace(b"Northwind Harbor memo", b"Northwind Harbor mem0")
    assert damaged != whole  # one byte of the stored part changed; its CRC did not
    outcome = run_among_good(real_pool, _zip("crc.docx", damaged), PARSE_LIMITS,
                             good=[good_for("docx"), good_for("text")],
                             next_file=good_for("docx"))
    omission = assert_omitted(outcome, stage="preflight", reason="corrupt")
    assert omission.label


def test_local_header_that_disagrees_with_the_directory_is_refused(
        plain_pool: IsolatedExtractor) -> None:
    payload = build_zip([ZipEntry("shown.txt", b"data", local_name="other.txt")])
    outcome = run_among_good(plain_pool, _zip("two-faced.zip", payload))
    assert_omitted(outcome, stage="archive", reason="header_mismatch")
