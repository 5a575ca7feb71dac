"""`inspect_archive`: a zip is judged by its central directory and local headers, never inflated.

Hostile shapes are written byte by byte with `capsa.guard.samples.build_zip`, because
`zipfile` will not write most of them; well-formed ones come from `zipfile`.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import ExtractionLimits, inspect_archive
from capsa.guard.archive import member_names, open_inspected, read_directory
from capsa.guard.samples import (
    FILE_ATTR,
    FLAG_ENCRYPTED,
    FLAG_UTF8,
    LOCAL_HEADER,
    MADE_BY_DOS,
    MADE_BY_UNIX,
    SAMPLES,
    SYMLINK_ATTR,
    ZipEntry,
    build_zip,
    zip_counting,
    zip_of,
    zip_with_zip64_end,
)

LIMITS = ExtractionLimits()
MiB = 1024 * 1024
GiB = 1024 * MiB


def assert_accepted(payload: bytes, limits: ExtractionLimits = LIMITS) -> None:
    try:
        inspect_archive(payload, limits, label="upload.zip")
    except IngestionRejected as error:
        pytest.fail(f"a harmless archive was refused: {error}")


def refusal(payload: bytes, limits: ExtractionLimits = LIMITS) -> IngestionRejected:
    with pytest.raises(IngestionRejected) as caught:
        inspect_archive(payload, limits, label="upload.zip")
    assert caught.value.label == "upload.zip"
    assert caught.value.stage == "archive"
    return caught.value


# well-formed archives


@pytest.mark.parametrize("stored", [True, False])
def test_inspect_archive_accepts_an_ordinary_zip(stored: bool) -> None:
    payload = zip_of({"a.txt": b"hello", "dir/b.csv": b"a,b\n1,2\n"}, stored=stored)

    assert_accepted(payload)


@pytest.mark.parametrize("kind", ["docx", "pptx", "xlsx", "epub"])
def test_inspect_archive_accepts_real_office_and_epub_files(kind: str) -> None:
    assert_accepted(SAMPLES[kind]())


def test_inspect_archive_accepts_members_written_with_data_descriptors() -> None:
    class Unseekable(io.RawIOBase):
        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, chunk: bytes) -> int:  # type: ignore[override]
            self.data += chunk
            return len(chunk)

    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("streamed.txt", b"streamed " * 100)
    assert zipfile.ZipFile(io.BytesIO(bytes(sink.data))).infolist()[0].flag_bits & 0x8

    assert_accepted(bytes(sink.data))


def test_inspect_archive_accepts_an_empty_archive() -> None:
    assert_accepted(build_zip([]))


def test_inspect_archive_accepts_names_that_only_contain_dots() -> None:
    payload = build_zip([ZipEntry("a..b.txt", b"x", method=0),
                         ZipEntry("..hidden", b"y", method=0),
                         ZipEntry("dir/.../c", b"z", method=0)])

    assert_accepted(payload)


def test_read_directory_reports_declared_members_without_decompressing() -> None:
    payload = build_zip([ZipEntry("a.txt", packed=b"abc", method=8, declared_size=500),
                         ZipEntry("b.txt", b"hello", method=0)])

    members, directory_start = read_directory(payload, max_members=10)

    assert [(m.name, m.method, m.compressed, m.uncompressed) for m in members] == [
        ("a.txt", 8, 3, 500), ("b.txt", 0, 5, 5)]
    assert [m.local_offset for m in members] == [0, LOCAL_HEADER.size + 5 + 3]
    assert payload[directory_start:directory_start + 4] == b"PK\x01\x02"


def test_read_directory_decodes_names_as_utf8_only_when_flagged() -> None:
    payload = build_zip([ZipEntry("résumé.txt", b"x", method=0, flags=FLAG_UTF8),
                         ZipEntry("caf\u00e9", b"y", method=0)])

    members, _ = read_directory(payload, max_members=10)

    assert [m.name for m in members] == ["résumé.txt", "caf\u00e9"]


def test_member_names_lists_the_central_directory() -> None:
    assert member_names(zip_of({"b": b"1", "a/c": b"2"})) == ["b", "a/c"]


# member count


def test_inspect_archive_refuses_too_many_members_with_the_declared_count() -> None:
    payload = zip_of({f"m{i}.txt": b"" for i in range(11)})

    error = refusal(payload, ExtractionLimits(max_members=10))

    assert error.reason == "too_many_members"
    assert "11 members" in error.detail
    assert "limit of 10" in error.detail


def test_inspect_archive_accepts_exactly_the_member_limit() -> None:
    payload = zip_of({f"m{i}.txt": b"" for i in range(10)})

    assert_accepted(payload, ExtractionLimits(max_members=10))


def test_read_directory_refuses_the_end_record_count_before_parsing_any_entry() -> None:
    # One real entry, but the end record declares 100 000 (via zip64): the
    # count alone decides, so the missing 99 999 entries are never looked for.
    payload = zip_with_zip64_end(build_zip([ZipEntry("a", b"x", method=0)]), count=100_000,
                                 mark_classic=True)

    with pytest.raises(IngestionRejected) as caught:
        read_directory(payload, max_members=1024)

    assert caught.value.reason == "too_many_members"
    assert "100000 members" in caught.value.detail
    assert caught.value.label == "<archive>"


def test_inspect_archive_checks_the_member_count_before_a_garbled_directory() -> None:
    payload = bytearray(zip_counting([ZipEntry("a", b"x", method=0)], 60_000))
    directory_at = payload.index(b"PK\x01\x02")
    payload[directory_at:directory_at + 4] = b"XXXX"

    error = refusal(bytes(payload))

    assert error.reason == "too_many_members"
    assert "60000" in error.detail


# declared sizes and ratios


def test_inspect_archive_refuses_a_zip64_member_declaring_ten_gib_by_its_ratio() -> None:
    payload = build_zip([ZipEntry("bomb.txt", b"x" * 100, method=0, declared_size=10 * GiB,
                                  zip64=True)])

    error = refusal(payload)

    assert error.reason == "archive_ratio"
    assert str(10 * GiB) in error.detail
    assert "limit of 100" in error.detail


def test_read_directory_reads_sizes_from_the_zip64_extra_field() -> None:
    payload = build_zip([ZipEntry("bomb.txt", b"x" * 100, method=0, declared_size=10 * GiB,
                                  zip64=True)])

    (member,), _ = read_directory(payload, max_members=10)

    assert (member.compressed, member.uncompressed) == (100, 10 * GiB)


def test_inspect_archive_refuses_a_declared_total_over_the_uncompressed_limit() -> None:
    payload = build_zip([ZipEntry("bomb.txt", b"x" * 100, method=0, declared_size=10 * GiB,
                                  zip64=True)])

    error = refusal(payload, ExtractionLimits(max_expansion_ratio=1e12))

    assert error.reason == "archive_too_large"
    assert str(8 * MiB) in error.detail
    assert str(10 * GiB) in error.detail


def test_inspect_archive_refuses_a_four_gib_declaration_that_holds_two_bytes() -> None:
    error = refusal(build_zip([ZipEntry("big.bin", b"xx", declared_size=0xFFFFFFFE, method=0)]))

    assert error.reason == "archive_ratio"
    assert "2 bytes to 4294967294" in error.detail


def test_inspect_archive_sums_declared_sizes_across_members() -> None:
    members = [ZipEntry(f"part{i}.bin", b"x" * 100_000, method=0, declared_size=3 * MiB)
               for i in range(3)]

    error = refusal(build_zip(members))

    assert error.reason == "archive_too_large"
    assert f"at least {9 * MiB}" in error.detail


def test_inspect_archive_ignores_the_ratio_of_a_member_at_the_floor() -> None:
    payload = build_zip([ZipEntry("a.bin", b"x" * 10, declared_size=MiB, method=0)])

    assert_accepted(payload)


def test_inspect_archive_refuses_the_ratio_of_a_member_one_byte_over_the_floor() -> None:
    error = refusal(build_zip([ZipEntry("a.bin", b"x" * 10, declared_size=MiB + 1, method=0)]))

    assert error.reason == "archive_ratio"
    assert "member 'a.bin' expands 10 bytes to 1048577" in error.detail


def test_inspect_archive_accepts_a_ratio_at_the_limit_past_the_floor() -> None:
    payload = build_zip([ZipEntry("a.bin", b"x" * 20_000, declared_size=2_000_000, method=0)])

    assert_accepted(payload)


def test_inspect_archive_refuses_a_real_deflated_ratio_bomb() -> None:
    error = refusal(zip_of({"zeros.bin": bytes(2 * MiB)}))

    assert error.reason == "archive_ratio"
    assert "zeros.bin" in error.detail


def test_inspect_archive_accepts_a_highly_compressible_member_under_the_floor() -> None:
    assert_accepted(zip_of({"zeros.bin": bytes(MiB)}))


def test_inspect_archive_refuses_an_overall_ratio_made_of_small_members() -> None:
    payload = zip_of({f"zeros{i}.bin": bytes(512 * 1024) for i in range(3)})

    error = refusal(payload)

    assert error.reason == "archive_ratio"
    assert error.detail.startswith("the archive expands")


def test_inspect_archive_honours_a_raised_ratio_limit() -> None:
    payload = zip_of({"zeros.bin": bytes(2 * MiB)})

    assert_accepted(payload, ExtractionLimits(max_expansion_ratio=5000))


# encryption and compression methods


@pytest.mark.parametrize("flags", [FLAG_ENCRYPTED, 0x40, FLAG_ENCRYPTED | 0x40])
def test_inspect_archive_refuses_encrypted_members(flags: int) -> None:
    error = refusal(build_zip([ZipEntry("secret.txt", b"x" * 12, flags=flags, method=0)]))

    assert error.reason == "encrypted"
    assert "secret.txt" in error.detail


def test_inspect_archive_refuses_aes_method_99_as_encrypted() -> None:
    error = refusal(build_zip([ZipEntry("aes.txt", b"x", method=99)]))

    assert error.reason == "encrypted"


@pytest.mark.parametrize("method", [1, 9, 12, 14, 93, 95])
def test_inspect_archive_refuses_methods_other_than_stored_and_deflate(method: int) -> None:
    error = refusal(build_zip([ZipEntry("packed.txt", b"x", method=method)]))

    assert error.reason == "unsupported_compression"
    assert f"method {method}" in error.detail


# names


@pytest.mark.parametrize(
    "name",
    ["../evil.txt", "a/../../evil.txt", "/etc/passwd", "C:\\Windows\\x.dll", "c:relative.txt",
     "..\\..\\evil.txt", "dir\\..\\..\\evil", "nul\x00byte.txt"],
)
def test_inspect_archive_refuses_member_names_that_escape_the_archive(name: str) -> None:
    error = refusal(build_zip([ZipEntry(name, b"x", method=0)]))

    assert error.reason == "unsafe_member_name"
    assert repr(name) in error.detail


def test_inspect_archive_refuses_a_symlink_member_written_by_zipfile() -> None:
    info = zipfile.ZipInfo("link")
    info.create_system = 3
    info.external_attr = SYMLINK_ATTR
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(info, "/etc/passwd")

    error = refusal(buffer.getvalue())

    assert error.reason == "unsafe_member_name"
    assert "symbolic link" in error.detail


def test_inspect_archive_accepts_a_regular_unix_file_mode() -> None:
    payload = build_zip([ZipEntry("plain.txt", b"x", method=0, made_by=MADE_BY_UNIX,
                                  external_attr=FILE_ATTR)])

    assert_accepted(payload)


def test_inspect_archive_ignores_symlink_mode_bits_from_a_non_unix_creator() -> None:
    payload = build_zip([ZipEntry("plain.txt", b"x", method=0, made_by=MADE_BY_DOS,
                                  external_attr=SYMLINK_ATTR)])

    assert_accepted(payload)


@pytest.mark.parametrize(
    ("first", "second"),
    [("word/document.xml", "word/document.xml"), ("word/document.xml", "WORD/Document.XML"),
     ("dir/a.txt", "dir\\a.txt"), ("straße.txt", "STRASSE.txt")],
)
def test_inspect_archive_refuses_duplicate_names_compared_casefolded(first: str,
                                                                      second: str) -> None:
    payload = build_zip([ZipEntry(first, b"one", flags=FLAG_UTF8, method=0),
                         ZipEntry(second, b"two", flags=FLAG_UTF8, method=0)])

    error = refusal(payload)

    assert error.reason == "duplicate_member"
    assert repr(second) in error.detail


# layout: overlaps and disagreeing headers


def test_inspect_archive_refuses_a_member_whose_data_quotes_the_next_local_header() -> None:
    # The Fifield "quoted overlap": a.txt's stored data contains b.txt's whole
    # local header and data, so inflating both reads b's bytes twice.
    b_local = LOCAL_HEADER.pack(b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 4, 4, 5, 0) + b"b.txt" + b"BBBB"
    payload = build_zip([ZipEntry("a.txt", b_local, method=0),
                         ZipEntry("b.txt", b"BBBB", method=0, write_local_header=False,
                                  central_offset=LOCAL_HEADER.size + 5)])

    error = refusal(payload)

    assert error.reason == "overlapping_members"
    assert "'a.txt'" in error.detail
    assert "'b.txt'" in error.detail


def test_inspect_archive_refuses_two_entries_sharing_one_local_header() -> None:
    payload = build_zip([ZipEntry("a.txt", b"AAAA", method=0),
                         ZipEntry("b.txt", b"AAAA", method=0, write_local_header=False,
                                  central_offset=0)])

    assert refusal(payload).reason == "header_mismatch"


@pytest.mark.parametrize(
    "entry",
    [
        ZipEntry("central.txt", b"x", method=0, local_name="local.txt"),
        ZipEntry("a.txt", b"x", central_method=8, method=0),
        ZipEntry("a.txt", b"xyz", central_packed_size=2, method=0),
        ZipEntry("a.txt", b"xyz", central_size=300, method=0),
        ZipEntry("a.txt", b"x", flags=FLAG_ENCRYPTED, central_flags=0, method=0),
    ],
    ids=["name", "method", "compressed-size", "uncompressed-size", "encryption-flag"],
)
def test_inspect_archive_refuses_a_local_header_that_disagrees_with_the_directory(
    entry: ZipEntry,
) -> None:
    error = refusal(build_zip([entry]))

    assert error.reason == "header_mismatch"
    assert "disagrees" in error.detail


def test_inspect_archive_refuses_a_directory_entry_with_no_local_header_behind_it() -> None:
    payload = build_zip([ZipEntry("a.txt", b"PAYLOAD-WITHOUT-A-HEADER", method=0),
                         ZipEntry("b.txt", b"x", method=0,
                                  central_offset=LOCAL_HEADER.size + 5 + 3)])

    error = refusal(payload)

    assert error.reason == "header_mismatch"
    assert "'b.txt' has no local header" in error.detail


def test_inspect_archive_refuses_member_data_that_runs_into_the_directory() -> None:
    error = refusal(build_zip([ZipEntry("a.txt", b"x", method=0, declared_packed_size=500)]))

    assert error.reason == "corrupt"
    assert "runs into the central directory" in error.detail


# nesting


def test_inspect_archive_allows_a_stored_archive_at_depth_one() -> None:
    inner = zip_of({"inner.txt": b"hi"})

    assert_accepted(zip_of({"inner.zip": inner}, stored=True))


def test_inspect_archive_refuses_a_stored_archive_at_depth_two() -> None:
    innermost = zip_of({"deep.txt": b"hi"})
    middle = zip_of({"deep.zip": innermost}, stored=True)

    error = refusal(zip_of({"middle.zip": middle}, stored=True))

    assert error.reason == "nested_too_deep"
    assert "'deep.zip'" in error.detail
    assert "depth 2" in error.detail
    assert "limit of 1" in error.detail


def test_inspect_archive_refuses_any_nested_archive_when_the_depth_limit_is_zero() -> None:
    payload = zip_of({"inner.zip": zip_of({"a": b"x"})})

    error = refusal(payload, ExtractionLimits(max_nesting_depth=0))

    assert error.reason == "nested_too_deep"
    assert "depth 1" in error.detail


def test_inspect_archive_counts_office_suffixes_as_nested_archives() -> None:
    payload = zip_of({"word/embeddings/sheet.xlsx": b"not inspected because deflated"})

    assert refusal(payload, ExtractionLimits(max_nesting_depth=0)).reason == "nested_too_deep"


def test_inspect_archive_recognises_a_stored_archive_by_its_magic_whatever_its_name() -> None:
    innermost = zip_of({"deep.txt": b"hi"})
    middle = zip_of({"data.bin": innermost}, stored=True)

    error = refusal(zip_of({"payload.dat": middle}, stored=True))

    assert error.reason == "nested_too_deep"
    assert "'data.bin'" in error.detail


def test_inspect_archive_inspects_a_stored_nested_archive_for_its_own_dangers() -> None:
    inner = build_zip([ZipEntry("../escape.txt", b"x", method=0)])

    error = refusal(zip_of({"inner.zip": inner}, stored=True))

    assert error.reason == "unsafe_member_name"
    assert "escape.txt" in error.detail


def test_inspect_archive_shares_the_uncompressed_budget_across_nesting_levels() -> None:
    inner = build_zip([ZipEntry("inner.bin", b"x" * 1000, declared_size=5 * MiB, method=0)])
    outer = build_zip([ZipEntry("inner.zip", inner, method=0), ZipEntry("outer.bin", b"y" * 1000,
                                                        declared_size=4 * MiB, method=0)])
    limits = ExtractionLimits(max_expansion_ratio=1e9)

    error = refusal(outer, limits)

    assert error.reason == "archive_too_large"


def test_inspect_archive_refuses_a_stored_member_named_like_an_archive_that_is_not_one() -> None:
    error = refusal(zip_of({"fake.zip": b"just text"}, stored=True))

    assert error.reason == "corrupt"


# structure


def test_inspect_archive_refuses_bytes_before_the_first_local_header() -> None:
    error = refusal(build_zip([ZipEntry("a.txt", b"x", method=0)],
                              prefix=b"MZ self-extractor stub"))

    assert error.reason == "corrupt"
    assert "local file header" in error.detail


def test_inspect_archive_refuses_a_truncated_archive() -> None:
    error = refusal(zip_of({"a.txt": b"hello" * 100})[:-40])

    assert error.reason == "corrupt"


def test_inspect_archive_refuses_an_archive_with_no_end_record() -> None:
    error = refusal(b"PK\x03\x04" + b"\x00" * 100)

    assert error.reason == "corrupt"
    assert "end-of-central-directory" in error.detail


def test_inspect_archive_refuses_multi_disk_archives() -> None:
    payload = bytearray(build_zip([ZipEntry("a.txt", b"x", method=0)]))
    end = payload.rindex(b"PK\x05\x06")
    payload[end + 4:end + 6] = (1).to_bytes(2, "little")

    assert "multi-disk" in refusal(bytes(payload)).detail


def test_inspect_archive_refuses_a_directory_that_lies_past_the_end() -> None:
    payload = bytearray(build_zip([ZipEntry("a.txt", b"x", method=0)]))
    end = payload.rindex(b"PK\x05\x06")
    payload[end + 16:end + 20] = (10_000).to_bytes(4, "little")

    error = refusal(bytes(payload))

    assert error.reason == "corrupt"
    assert "past the end" in error.detail


def test_inspect_archive_refuses_zip64_markers_without_a_zip64_end_record() -> None:
    payload = bytearray(build_zip([ZipEntry("a.txt", b"x", method=0)]))
    end = payload.rindex(b"PK\x05\x06")
    payload[end + 10:end + 12] = b"\xff\xff"

    error = refusal(bytes(payload))

    assert error.reason == "corrupt"
    assert "zip64" in error.detail


def test_inspect_archive_finds_the_end_record_behind_an_archive_comment() -> None:
    payload = build_zip([ZipEntry("a.txt", b"x", method=0)], comment=b"a comment " * 50)

    assert_accepted(payload)


def test_read_directory_labels_its_refusals_for_the_caller_to_relabel() -> None:
    with pytest.raises(IngestionRejected) as caught:
        read_directory(b"not a zip", max_members=10)

    assert (caught.value.label, caught.value.stage, caught.value.reason) == (
        "<archive>", "archive", "corrupt")


# one archive, one truth: every record agrees, and zipfile lists what was checked


def test_inspect_archive_refuses_bytes_after_the_end_records_comment() -> None:
    payload = build_zip([ZipEntry("a.txt", b"alpha", method=0)], comment=b"note") + b"trailing"

    error = refusal(payload)

    assert error.reason == "header_mismatch"
    assert "comment length (4)" in error.detail


def test_inspect_archive_refuses_an_end_record_whose_two_counts_differ() -> None:
    payload = bytearray(build_zip([ZipEntry("a.txt", b"a", method=0),
                                   ZipEntry("b.txt", b"b", method=0)]))
    end = payload.rindex(b"PK\x05\x06")
    payload[end + 8:end + 10] = (1).to_bytes(2, "little")  # entries on this disk

    error = refusal(bytes(payload))

    assert error.reason == "header_mismatch"
    assert "counts 1 entries on its disk but 2 in total" in error.detail


def test_inspect_archive_refuses_a_name_that_is_not_the_utf8_it_claims() -> None:
    payload = build_zip([ZipEntry("x", b"data", flags=FLAG_UTF8, method=0)]).replace(b"x", b"\xff")

    error = refusal(payload)

    assert error.reason == "header_mismatch"


def test_inspect_archive_refuses_a_directory_zipfile_cannot_read() -> None:
    # An extra field that declares more bytes than it has: capsa's reader skips
    # it, zipfile refuses the whole archive. Where they differ, capsa refuses.
    payload = build_zip([ZipEntry("a.txt", b"alpha", method=0,
                                  central_extra=b"\x99\x99\x10\x00ab")])

    error = refusal(payload)

    assert error.reason == "corrupt"
    assert "zipfile cannot read the directory" in error.detail


def test_inspect_archive_refuses_a_zip64_locator_pointing_elsewhere() -> None:
    payload = bytearray(zip_with_zip64_end(build_zip([ZipEntry("a.txt", b"alpha", method=0)]),
                                           count=1, mark_classic=True))
    locator = payload.rindex(b"PK\x06\x07")
    payload[locator + 8:locator + 16] = (0).to_bytes(8, "little")

    error = refusal(bytes(payload))

    assert error.reason == "header_mismatch"
    assert "zip64 locator points at offset 0" in error.detail


def test_inspect_archive_accepts_consistent_zip64_end_records() -> None:
    honest = build_zip([ZipEntry("a.txt", b"alpha", method=0),
                        ZipEntry("b.txt", b"beta", method=0)])
    payload = zip_with_zip64_end(honest, count=2, mark_classic=True)

    with open_inspected(payload, LIMITS, label="upload.zip") as archive:
        assert archive.namelist() == ["a.txt", "b.txt"]
