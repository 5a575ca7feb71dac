"""Zip containers judged by their central directory alone.

Nothing here decompresses a byte. Sizes, ratios, member counts, names and
layout are read from the end-of-central-directory record, the central
directory and the local headers, with `struct`, so a 42 KB file that declares
100 GB is refused in microseconds, and CPython's own `zipfile` (whose overlap
check depends on the interpreter's patch level) is never trusted to catch a
bomb. DOCX, XLSX, PPTX and EPUB are zips and pass through here first.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from capsa.errors import IngestionRejected, RejectionReason
from capsa.guard.limits import ExtractionLimits

__all__ = [
    "OLE_MAGIC", "OleDirectory", "ZipMember", "inspect_archive", "inspect_ole", "member_names",
    "open_inspected", "read_directory", "read_ole_directory",
]

_EOCD = struct.Struct("<4sHHHHIIH")
_EOCD64_LOCATOR = struct.Struct("<4sIQI")
_EOCD64 = struct.Struct("<4sQHHIIQQQQ")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_MAX_COMMENT = 0xFFFF
_FLAG_ENCRYPTED = 0x1
_FLAG_DESCRIPTOR = 0x8
_FLAG_STRONG = 0x40
_FLAG_UTF8 = 0x800
_ALLOWED_METHODS = frozenset({0, 8})
_ARCHIVE_SUFFIXES = (".zip", ".jar", ".docx", ".xlsx", ".pptx", ".epub", ".odt", ".ods",
                     ".odp", ".apk", ".docm", ".xlsm", ".pptm")
_DRIVE = re.compile(r"^[A-Za-z]:")
_S_IFMT, _S_IFLNK = 0o170000, 0o120000
_SHOWN_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class ZipMember:
    """One central-directory entry, as declared (nothing here was decompressed)."""

    name: str
    method: int
    flags: int
    compressed: int
    uncompressed: int
    local_offset: int
    is_symlink: bool


class _Refusal(Exception):
    def __init__(self, reason: RejectionReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: RejectionReason = reason
        self.detail = detail


def read_directory(payload: bytes, *, max_members: int) -> tuple[list[ZipMember], int]:
    """Parse the central directory; return its members and where it starts.

    The member count in the end record is checked against `max_members`
    *before* a single entry is parsed, so a 100 000-member archive costs one
    `struct.unpack`.

    Raises:
        IngestionRejected: with label ``"<archive>"``; callers re-label it.
    """
    try:
        return _read_directory(payload, max_members)
    except _Refusal as refusal:
        raise IngestionRejected(refusal.detail, label="<archive>", stage="archive",
                                reason=refusal.reason) from None


def member_names(payload: bytes) -> list[str]:
    """Names in a zip's central directory (at most 65 536), for telling DOCX from XLSX."""
    members, _ = read_directory(payload, max_members=65_536)
    return [m.name for m in members]


def inspect_archive(payload: bytes, limits: ExtractionLimits, *, label: str,
                    budget: int | None = None) -> int:
    """Refuse a zip container whose declarations are dangerous, before any parser runs.

    Checks, from the central directory and local headers only: member count
    (shared, like the declared total, with the archives stored inside);
    declared uncompressed total (shared across nesting levels); per-member and
    overall expansion ratio past `limits.ratio_floor_bytes`; encrypted members
    and compression methods other than stored and deflate; absolute,
    drive-letter, ``..`` and symlink member names; duplicate names (compared
    casefolded, the DOCX parser-differential trick); local headers that
    disagree with the central ones; members whose data overlap (the Fifield
    "overlapping files" bomb); and nesting: a member that is itself an archive
    counts one level deeper, and a stored one is inspected in turn. A deflated
    nested archive within the depth limit is never opened by any capsa parser.

    Args:
        budget: the declared bytes allowed, when less than `limits.max_uncompressed_bytes`
            is left: an archive found inside another file shares that file's allowance.

    Returns:
        The uncompressed bytes its members declare, stored archives inside included.

    Raises:
        IngestionRejected: stage ``archive``, with the reason and the numbers.

    Examples:
        >>> import io, zipfile
        >>> buf = io.BytesIO()
        >>> with zipfile.ZipFile(buf, "w") as z:
        ...     z.writestr("a.txt", "hello")
        >>> inspect_archive(buf.getvalue(), ExtractionLimits(), label="a.zip")
        5
    """
    allowed = limits.max_uncompressed_bytes if budget is None else budget
    left = [allowed]
    try:
        _inspect(payload, limits, depth=0, budget=left, members=[limits.max_members])
    except _Refusal as refusal:
        detail = refusal.detail
        if budget is not None and refusal.reason == "archive_too_large":
            detail = (f"members declare more than the {allowed} uncompressed bytes left of the "
                      f"{limits.max_uncompressed_bytes} (max_uncompressed_bytes) it shares "
                      "with the file it was found in")
        raise IngestionRejected(detail, label=label, stage="archive",
                                reason=refusal.reason) from None
    return allowed - left[0]


def open_inspected(payload: bytes, limits: ExtractionLimits, *, label: str) -> zipfile.ZipFile:
    """Inspect `payload`, then open it with `zipfile` for reading its members.

    The inspection has already proved that `zipfile` sees exactly the
    entries it checked (same names, offsets, methods and sizes, in the same
    order), and `zipfile` never inflates a member past the size it declares,
    so nothing read through the returned archive can be a member that was
    not checked, or grow past its checked size. Parsers that open the same
    bytes with `zipfile` themselves (python-docx, python-pptx, openpyxl) see
    the same list, because `zipfile` reads the same bytes the same way.

    Raises:
        IngestionRejected: stage ``archive``, as `inspect_archive`.

    Examples:
        >>> import io, zipfile
        >>> buf = io.BytesIO()
        >>> with zipfile.ZipFile(buf, "w") as z:
        ...     z.writestr("a.txt", "hello")
        >>> with open_inspected(buf.getvalue(), ExtractionLimits(), label="a.zip") as archive:
        ...     archive.read("a.txt")
        b'hello'
    """
    inspect_archive(payload, limits, label=label)
    return zipfile.ZipFile(io.BytesIO(payload))


def _inspect(payload: bytes, limits: ExtractionLimits, *, depth: int, budget: list[int],
             members: list[int]) -> None:
    if not payload.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise _Refusal("corrupt", "archive does not start with a local file header")
    count, directory_start, directory_size = _locate(payload, limits.max_members)
    # Like the byte budget, the member count is shared across nesting levels: a zip of
    # stored zips must not make this scan parse max_members entries per inner archive.
    members[0] -= count
    if members[0] < 0:
        raise _Refusal("too_many_members",
                       f"its archives and the archives stored in them declare more than "
                       f"{limits.max_members} members together (max_members)")
    seen: set[str] = set()
    spans: list[tuple[int, int, str]] = []
    listed: list[ZipMember] = []
    total_in = total_out = 0
    # Each entry is checked as soon as it is parsed: a bomb stops at its first
    # bad member instead of after the whole directory has been read.
    for member in _entries(payload, count, directory_start, directory_size):
        listed.append(member)
        _check_member(member, limits, seen)
        start, end = _local_span(payload, member, directory_start)
        spans.append((start, end, member.name))
        total_in += member.compressed
        total_out += member.uncompressed
        budget[0] -= member.uncompressed
        if budget[0] < 0:
            raise _Refusal(
                "archive_too_large",
                f"members declare more than {limits.max_uncompressed_bytes} uncompressed bytes "
                f"(at least {limits.max_uncompressed_bytes - budget[0]})",
            )
    _check_ratio(total_out, total_in, limits, "the archive")
    _check_overlaps(spans)
    if depth == 0:
        _check_zipfile_agrees(payload, listed)
    for member in listed:
        if _looks_like_archive(payload, member):
            if depth + 1 > limits.max_nesting_depth:
                raise _Refusal(
                    "nested_too_deep",
                    f"member {_shown(member.name)} is an archive at nesting depth {depth + 1}, "
                    f"over the limit of {limits.max_nesting_depth}",
                )
            if member.method == 0:
                start = _data_start(payload, member)
                _inspect(payload[start:start + member.compressed], limits,
                         depth=depth + 1, budget=budget, members=members)


def _check_zipfile_agrees(payload: bytes, members: list[ZipMember]) -> None:
    """Refuse the archive unless `zipfile` lists exactly the entries that were checked."""
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            listed = archive.infolist()
    except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError, struct.error) as exc:
        # (UnicodeDecodeError is a ValueError: zipfile decodes UTF-8 names strictly.)
        raise _Refusal("corrupt", f"zipfile cannot read the directory: {exc}") from None
    seen = [(i.header_offset, i.compress_type, i.compress_size, i.file_size) for i in listed]
    checked = [(m.local_offset, m.method, m.compressed, m.uncompressed) for m in members]
    if seen != checked or [i.filename for i in listed] != [m.name for m in members]:
        raise _Refusal("header_mismatch",
                       f"zipfile lists {len(listed)} entries where the inspection checked "
                       f"{len(members)}, or reads them differently")


def _read_directory(payload: bytes, max_members: int) -> tuple[list[ZipMember], int]:
    count, start, size = _locate(payload, max_members)
    return list(_entries(payload, count, start, size)), start


def _locate(payload: bytes, max_members: int) -> tuple[int, int, int]:
    """The member count, offset and size of the central directory, count checked first.

    The end records are found exactly where `zipfile` looks for them (the
    classic one at the very end, or the last signature in the comment window;
    a zip64 record whenever a locator sits just before the classic one), and
    every figure they give must agree with every other: the two entry counts,
    the classic and the zip64 values, and the directory's offset plus size
    with the position of the record that follows it. A parser that trusts a
    different record than this check did would read a different archive.
    """
    eocd_at = _find_end_record(payload)
    (_, disk, cd_disk, on_disk, count, cd_size, cd_offset,
     comment_len) = _EOCD.unpack_from(payload, eocd_at)
    if disk != 0 or cd_disk != 0:
        raise _Refusal("corrupt", "multi-disk archives are not supported")
    if eocd_at + _EOCD.size + comment_len != len(payload):
        raise _Refusal("header_mismatch",
                       f"the end record's comment length ({comment_len}) does not reach the end "
                       f"of the file ({len(payload) - eocd_at - _EOCD.size} bytes follow it)")
    directory_end = eocd_at
    locator_at = eocd_at - _EOCD64_LOCATOR.size
    classic = count
    if locator_at >= 0 and payload[locator_at:locator_at + 4] == b"PK\x06\x07":
        count, cd_size, cd_offset, directory_end = _read_zip64_end(
            payload, locator_at, (count, cd_size, cd_offset))
    elif count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        raise _Refusal("corrupt", "zip64 sizes without a zip64 end locator")
    if on_disk != classic:
        raise _Refusal("header_mismatch", f"the end record counts {on_disk} entries on its disk "
                                          f"but {classic} in total")
    if count > max_members:
        raise _Refusal("too_many_members",
                       f"declares {count} members, over the limit of {max_members}")
    if cd_offset + cd_size > len(payload):
        raise _Refusal("corrupt", "central directory lies past the end of the file")
    if cd_offset + cd_size != directory_end:
        raise _Refusal("header_mismatch",
                       f"the central directory is declared at offset {cd_offset} with {cd_size} "
                       f"bytes, but the end record that follows it starts at {directory_end}")
    return count, cd_offset, cd_size


def _find_end_record(payload: bytes) -> int:
    tail = len(payload) - _EOCD.size
    if tail >= 0 and payload[tail:tail + 4] == b"PK\x05\x06" and payload[-2:] == b"\0\0":
        return tail  # zipfile's fast path: a record with no comment, last in the file
    eocd_at = payload.rfind(b"PK\x05\x06", max(0, tail - _MAX_COMMENT))
    if eocd_at < 0 or eocd_at + _EOCD.size > len(payload):
        raise _Refusal("corrupt", "no end-of-central-directory record (truncated archive?)")
    return eocd_at


def _entries(payload: bytes, count: int, start: int, size: int) -> Iterator[ZipMember]:
    pos = start
    for _ in range(count):
        yield _read_central(payload, pos)
        pos += _CENTRAL.size + sum(_CENTRAL.unpack_from(payload, pos)[10:13])
        if pos > start + size:
            raise _Refusal("corrupt", "central directory entries overrun its declared size")
    if pos != start + size:
        # zipfile reads every entry inside the declared size, whatever the count says.
        raise _Refusal("header_mismatch",
                       f"the central directory holds {start + size - pos} bytes past the {count} "
                       "entries the end record counts (entries hidden from the count)")


def _read_zip64_end(payload: bytes, locator_at: int, classic: tuple[int, int, int]
                    ) -> tuple[int, int, int, int]:
    """Count, size and offset from the zip64 end record, and where that record starts."""
    _, disk, end_at, disks = _EOCD64_LOCATOR.unpack_from(payload, locator_at)
    if disk != 0 or disks > 1:
        raise _Refusal("corrupt", "multi-disk archives are not supported")
    expected = locator_at - _EOCD64.size  # where zipfile reads it: no extensible data
    if end_at != expected or expected < 0 or payload[expected:expected + 4] != b"PK\x06\x06":
        raise _Refusal("header_mismatch",
                       f"the zip64 locator points at offset {end_at}, but a zip64 end record "
                       f"is read at {expected}")
    (_, _, _, _, disk_num, disk_dir, on_disk, count, cd_size,
     cd_offset) = _EOCD64.unpack_from(payload, expected)
    if disk_num != 0 or disk_dir != 0:
        raise _Refusal("corrupt", "multi-disk archives are not supported")
    if on_disk != count:
        raise _Refusal("header_mismatch", f"the zip64 end record counts {on_disk} entries on its "
                                          f"disk but {count} in total")
    markers = (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    for what, old, new, marker in zip(("entry count", "directory size", "directory offset"),
                                      classic, (count, cd_size, cd_offset), markers, strict=True):
        if old not in (marker, new):
            raise _Refusal("header_mismatch", f"the classic end record's {what} ({old}) "
                                              f"disagrees with the zip64 record's ({new})")
    return count, cd_size, cd_offset, expected


def _read_central(payload: bytes, pos: int) -> ZipMember:
    if pos + _CENTRAL.size > len(payload) or payload[pos:pos + 4] != b"PK\x01\x02":
        raise _Refusal("corrupt", "central directory entry is missing or truncated")
    (_, made_by, _, flags, method, _, _, _, compressed, uncompressed, name_len, extra_len,
     _, _, _, external, offset) = _CENTRAL.unpack_from(payload, pos)
    raw_name = payload[pos + _CENTRAL.size:pos + _CENTRAL.size + name_len]
    extra = payload[pos + _CENTRAL.size + name_len:pos + _CENTRAL.size + name_len + extra_len]
    compressed, uncompressed, offset = _apply_zip64(extra, compressed, uncompressed, offset)
    name = raw_name.decode("utf-8" if flags & _FLAG_UTF8 else "cp437", "replace")
    symlink = (made_by >> 8) == 3 and ((external >> 16) & _S_IFMT) == _S_IFLNK
    return ZipMember(name, method, flags, compressed, uncompressed, offset, symlink)


def _apply_zip64(extra: bytes, compressed: int, uncompressed: int, offset: int
                 ) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        if tag == 0x0001:
            values = extra[pos + 4:pos + 4 + size]
            fields = [uncompressed, compressed, offset]
            cursor = 0
            for i, current in enumerate(fields):
                if current == 0xFFFFFFFF and cursor + 8 <= len(values):
                    fields[i] = int(struct.unpack_from("<Q", values, cursor)[0])
                    cursor += 8
            uncompressed, compressed, offset = fields
        pos += 4 + size
    return compressed, uncompressed, offset


def _check_member(member: ZipMember, limits: ExtractionLimits, seen: set[str]) -> None:
    name = member.name
    if member.flags & (_FLAG_ENCRYPTED | _FLAG_STRONG) or member.method == 99:
        raise _Refusal("encrypted", f"member {_shown(name)} is encrypted")
    if member.method not in _ALLOWED_METHODS:
        raise _Refusal("unsupported_compression",
                       f"member {_shown(name)} uses compression method {member.method} "
                       "(only stored and deflate are allowed)")
    normal = name.replace("\\", "/")
    if (normal.startswith("/") or _DRIVE.match(normal) or "\x00" in name
            or ".." in normal.split("/")):
        raise _Refusal("unsafe_member_name", f"member name {_shown(name)} escapes the archive")
    if member.is_symlink:
        raise _Refusal("unsafe_member_name", f"member {_shown(name)} is a symbolic link")
    key = normal.casefold()
    if key in seen:
        raise _Refusal("duplicate_member",
                       f"member {_shown(name)} appears twice; parsers disagree on which one counts")
    seen.add(key)
    _check_ratio(member.uncompressed, member.compressed, limits, f"member {_shown(name)}")


def _shown(name: str) -> str:
    """A member name as a refusal quotes it: `repr` (so controls and bidi overrides
    are escaped) of at most `_SHOWN_NAME_CHARS` characters, with the full length
    when it was cut (a zip name may be 65,535 bytes, and a refusal is printed and logged).

    Examples:
        >>> _shown("a.txt")
        "'a.txt'"
        >>> _shown("x" * 300).endswith("… (300 characters)")
        True
    """
    if len(name) <= _SHOWN_NAME_CHARS:
        return repr(name)
    return f"{name[:_SHOWN_NAME_CHARS]!r}… ({len(name)} characters)"


def _check_ratio(out: int, into: int, limits: ExtractionLimits, what: str) -> None:
    if out <= limits.ratio_floor_bytes:
        return
    ratio = out / max(1, into)
    if ratio > limits.max_expansion_ratio:
        raise _Refusal(
            "archive_ratio",
            f"{what} expands {into} bytes to {out} (ratio {ratio:.0f}), "
            f"over the limit of {limits.max_expansion_ratio:g}",
        )


def _data_start(payload: bytes, member: ZipMember) -> int:
    fields = _LOCAL.unpack_from(payload, member.local_offset)
    return member.local_offset + _LOCAL.size + int(fields[9]) + int(fields[10])


def _local_span(payload: bytes, member: ZipMember, directory_start: int) -> tuple[int, int]:
    at = member.local_offset
    if at + _LOCAL.size > directory_start or payload[at:at + 4] != b"PK\x03\x04":
        raise _Refusal("header_mismatch",
                       f"member {_shown(member.name)} has no local header where the directory says")
    (_, _, flags, method, _, _, _, compressed, uncompressed, name_len,
     _) = _LOCAL.unpack_from(payload, at)
    local_name = payload[at + _LOCAL.size:at + _LOCAL.size + name_len]
    central_name = member.name.encode("utf-8" if member.flags & _FLAG_UTF8 else "cp437",
                                      "replace")
    sizes_differ = not flags & _FLAG_DESCRIPTOR and 0xFFFFFFFF not in (compressed, uncompressed) \
        and (compressed, uncompressed) != (member.compressed, member.uncompressed)
    if (local_name != central_name or method != member.method
            or (flags & _FLAG_ENCRYPTED) != (member.flags & _FLAG_ENCRYPTED) or sizes_differ):
        raise _Refusal("header_mismatch",
                       f"local header of member {_shown(member.name)} disagrees with the directory")
    end = _data_start(payload, member) + member.compressed
    if end > directory_start:
        raise _Refusal("corrupt", f"member {_shown(member.name)} runs into the central directory")
    return at, end


def _check_overlaps(spans: list[tuple[int, int, str]]) -> None:
    previous_end, previous_name = -1, ""
    for start, end, name in sorted(spans):
        if start < previous_end:
            raise _Refusal("overlapping_members",
                           f"members {_shown(previous_name)} and {_shown(name)} share bytes "
                           "(a zip bomb shape)")
        previous_end, previous_name = end, name


def _looks_like_archive(payload: bytes, member: ZipMember) -> bool:
    if member.name.lower().endswith(_ARCHIVE_SUFFIXES):
        return True
    if member.method == 0 and member.compressed >= 4:
        start = _data_start(payload, member)
        return payload[start:start + 4] == b"PK\x03\x04"
    return False


# --------------------------------------------------------------- OLE compound files

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""The first eight bytes of every OLE (CFB) compound file: .doc, .xls, .ppt, .msg."""
_OLE_HEADER = struct.Struct("<8s16sHHHHH6sIIIIIIIII")
_OLE_ENTRY = struct.Struct("<64sHBBIII16sIQQIQ")
_FREE, _END_OF_CHAIN, _FAT_SECTOR, _DIFAT_SECTOR = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFC
_MAX_REGULAR_ID = 0xFFFFFFFA
_NO_STREAM = 0xFFFFFFFF
_HEADER_DIFAT = 109


@dataclass(frozen=True, slots=True)
class OleDirectory:
    """What a compound file's directory declares, read without opening a stream.

    `top` names the entries directly under the root storage (``WordDocument``,
    ``Workbook``, ``PowerPoint Document``, ``__properties_version1.0``), which
    is what tells a .doc from an .xls, a .ppt or an Outlook .msg.
    """

    top: frozenset[str]
    """Names of the root storage's own children."""
    entries: int
    """Storages and streams in the directory, the root included."""
    stream_bytes: int
    """Declared size of every stream, summed."""


def read_ole_directory(payload: bytes) -> OleDirectory:
    """Read a compound file's header, allocation table and directory, and check their shape.

    Only the structures LibreOffice and `olefile` would walk first are read,
    each bounded by the file itself: every sector number must lie inside the
    file, every chain must end without a loop, no sector may belong to two
    chains, and no stream may declare more bytes than the file holds (a
    compound file is not compressed, so a bigger claim is a lie meant to make
    a reader allocate). Nothing is decoded past the directory.

    Raises:
        IngestionRejected: ``corrupt`` or ``overlapping_members``, with label
            ``"<archive>"``; callers re-label it.
    """
    try:
        return _read_ole(payload)
    except _Refusal as refusal:
        raise IngestionRejected(refusal.detail, label="<archive>", stage="archive",
                                reason=refusal.reason) from None


def inspect_ole(payload: bytes, limits: ExtractionLimits, *, label: str) -> OleDirectory:
    """Apply `limits` to a compound file's directory before any parser sees it.

    The count of storages and streams is held to `max_members`, their declared
    total to `max_uncompressed_bytes`, after the structural checks of
    `read_ole_directory`.

    Raises:
        IngestionRejected: stage ``archive``: ``corrupt``, ``overlapping_members``,
            ``too_many_members`` or ``archive_too_large``.
    """
    try:
        directory = _read_ole(payload, max_entries=limits.max_members)
        if directory.stream_bytes > limits.max_uncompressed_bytes:
            raise _Refusal("archive_too_large",
                           f"its streams declare {directory.stream_bytes} bytes, over the "
                           f"limit of {limits.max_uncompressed_bytes} (max_uncompressed_bytes)")
    except _Refusal as refusal:
        raise IngestionRejected(refusal.detail, label=label, stage="archive",
                                reason=refusal.reason) from None
    return directory


def _read_ole(payload: bytes, max_entries: int | None = None) -> OleDirectory:
    if len(payload) < 512 or not payload.startswith(OLE_MAGIC):
        raise _Refusal("corrupt", "not a compound file (no OLE header)")
    (_, _, _, major, byte_order, shift, mini_shift, _, _, fat_count, dir_start, _,
     cutoff, minifat_start, minifat_count, difat_start, difat_count) = _OLE_HEADER.unpack_from(
        payload)
    if byte_order != 0xFFFE or (major, shift) not in ((3, 9), (4, 12)) or mini_shift != 6:
        raise _Refusal("corrupt", f"an OLE header with version {major}, sector shift {shift} "
                                  f"and mini-sector shift {mini_shift}, which no writer produces")
    size = 1 << shift
    sectors = (len(payload) - size + size - 1) // size if len(payload) > size else 0
    if fat_count > sectors or difat_count > sectors:
        raise _Refusal("corrupt", f"the header declares {fat_count} allocation-table sectors "
                                  f"and {difat_count} DIFAT sectors; the file holds {sectors}")

    def sector(number: int) -> bytes:
        if number >= sectors:
            raise _Refusal("corrupt", f"sector {number} lies outside the file's {sectors}")
        start = (number + 1) * size
        return payload[start:start + size].ljust(size, b"\x00")

    # The DIFAT chain is walked to its end, but only the sector numbers the header
    # counts are kept, and only the FAT sectors that can describe a sector of this
    # file are read: a chain that names itself, or one FAT sector listed thousands of
    # times, must not make this process hold many times the file in Python ints.
    fat_ids = [number for number in struct.unpack_from(f"<{_HEADER_DIFAT}I", payload, 0x4C)
               if number <= _MAX_REGULAR_ID]
    following, seen_difat = difat_start, set[int]()
    while following <= _MAX_REGULAR_ID:
        if following in seen_difat or len(seen_difat) >= difat_count:
            raise _Refusal("corrupt", "the DIFAT chain is longer than the header declares")
        seen_difat.add(following)
        block = struct.unpack(f"<{size // 4}I", sector(following))
        if len(fat_ids) < fat_count:
            fat_ids.extend(number for number in block[:-1] if number <= _MAX_REGULAR_ID)
        following = block[-1]
    fat_ids = fat_ids[:fat_count]
    if len(fat_ids) != fat_count:
        raise _Refusal("corrupt", f"the header declares {fat_count} allocation-table sectors "
                                  f"and the DIFAT lists {len(fat_ids)}")
    outside = next((number for number in fat_ids if number >= sectors), None)
    if outside is not None:
        raise _Refusal("corrupt", f"sector {outside} lies outside the file's {sectors}")
    fat: list[int] = []
    for number in fat_ids[:-(-sectors // (size // 4))]:  # entries past the file mean nothing
        fat.extend(struct.unpack(f"<{size // 4}I", sector(number)))
    owner: dict[int, str] = {}

    def chain(start: int, what: str) -> list[int]:
        found: list[int] = []
        current = start
        while current != _END_OF_CHAIN:
            if current > _MAX_REGULAR_ID or current >= min(sectors, len(fat)):
                raise _Refusal("corrupt", f"the {what} chain points at sector {current:#x}, "
                                          f"outside the file's {sectors}")
            if current in owner:
                raise _Refusal("overlapping_members" if owner[current] != what else "corrupt",
                               f"sector {current} belongs to the {owner[current]} and to the "
                               f"{what} (a loop or overlapping streams)")
            owner[current] = what
            found.append(current)
            current = fat[current]
        return found

    for number in fat_ids:
        owner[number] = "allocation table"
    directory = b"".join(sector(number) for number in chain(dir_start, "directory"))
    count = len(directory) // 128
    if max_entries is not None and count > max_entries + 1:
        used = sum(1 for index in range(count) if directory[index * 128 + 66] != 0)
        if used > max_entries + 1:
            raise _Refusal("too_many_members", f"{used - 1} storages and streams, over the "
                                               f"limit of {max_entries} (max_members)")
    # only the entries in use are unpacked: a directory padded with empty ones costs a scan
    entries: dict[int, tuple[Any, ...]] = {
        index: _OLE_ENTRY.unpack_from(directory, index * 128)
        for index in range(count) if directory[index * 128 + 66] != 0}
    if 0 not in entries or entries[0][2] != 5:
        raise _Refusal("corrupt", "the directory has no root entry")
    if minifat_count:
        chain(minifat_start, "mini allocation table")
    root_start, root_size = entries[0][11], _ole_size(entries[0][12], major)
    if root_size:
        _check_stream_size(root_size, len(payload), "the mini stream")
        mini = chain(root_start, "mini stream")
        if len(mini) * size < root_size:
            raise _Refusal("corrupt", f"the mini stream declares {root_size} bytes and its "
                                      f"chain holds {len(mini) * size}")
    total, used = root_size, 1
    for index, entry in sorted(entries.items())[1:]:
        kind, start, length = entry[2], entry[11], _ole_size(entry[12], major)
        used += 1
        if kind not in (1, 2):
            raise _Refusal("corrupt", f"directory entry {index} has the unknown type {kind}")
        if kind == 2:
            _check_stream_size(length, len(payload), f"stream {_entry_name(entry)!r}")
            total += length
            if length >= cutoff:  # small streams live in the mini stream, checked above
                held = chain(start, f"stream {_entry_name(entry)!r}") if length else []
                if len(held) * size < length:
                    raise _Refusal("corrupt", f"stream {_entry_name(entry)!r} declares {length} "
                                              f"bytes and its chain holds {len(held) * size}")
    if max_entries is not None and used - 1 > max_entries:
        raise _Refusal("too_many_members", f"{used - 1} storages and streams, over the limit "
                                           f"of {max_entries} (max_members)")
    return OleDirectory(top=frozenset(_top_names(entries)), entries=used, stream_bytes=total)


def _ole_size(declared: int, major: int) -> int:
    """A stream's size; version-3 files keep only the low 32 bits (old writers left junk)."""
    return declared & 0xFFFFFFFF if major == 3 else declared


def _check_stream_size(length: int, file_size: int, what: str) -> None:
    if length > file_size:
        raise _Refusal("corrupt", f"{what} declares {length} bytes in a file of {file_size}; "
                                  "a compound file is not compressed, so that is a lie")


def _entry_name(entry: tuple[Any, ...]) -> str:
    raw, length = entry[0], entry[1]
    if not isinstance(raw, bytes) or not isinstance(length, int):
        return ""
    return raw[:max(min(length, 64) - 2, 0)].decode("utf-16-le", "replace")


def _top_names(entries: dict[int, tuple[Any, ...]]) -> list[str]:
    """The root's children: the red-black tree under the root's child, walked without recursion."""
    names: list[str] = []
    first = entries[0][6]
    pending = [first] if isinstance(first, int) else []
    seen: set[int] = set()
    while pending:
        index = pending.pop()
        if index not in entries or index in seen:
            continue
        seen.add(index)
        entry = entries[index]
        names.append(_entry_name(entry))
        pending.extend(number for number in (entry[4], entry[5]) if isinstance(number, int))
    return names
