"""Zip files written byte by byte, so a test can state exactly what each header declares.

`zipfile` refuses to write most of what the guard must refuse to read (lying
sizes, disagreeing headers, overlapping members), so the hostile shapes are
assembled here with `struct`. Nothing is compressed: the guard never
decompresses, so declared sizes and the bytes present may differ freely.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field

LOCAL = struct.Struct("<4sHHHHHIIIHH")
CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
EOCD = struct.Struct("<4sHHHHIIH")
EOCD64 = struct.Struct("<4sQHHIIQQQQ")
EOCD64_LOCATOR = struct.Struct("<4sIQI")
UNIX = 3 << 8
SYMLINK_MODE = 0o120777 << 16
FLAG_ENCRYPTED = 0x1
FLAG_UTF8 = 0x800
ZIP64_MARK = 0xFFFFFFFF


@dataclass(frozen=True)
class Entry:
    """One member: what its local header and its central-directory entry declare.

    Every ``central_*`` field defaults to the local value, so a disagreement
    is one keyword away. Sizes default to ``len(data)``.
    """

    name: str
    data: bytes = b""
    method: int = 0
    flags: int = 0
    compressed: int | None = None
    uncompressed: int | None = None
    made_by: int = 20
    external: int = 0
    zip64: bool = False
    central_name: str | None = None
    central_method: int | None = None
    central_flags: int | None = None
    central_compressed: int | None = None
    central_uncompressed: int | None = None
    offset: int | None = None
    """Where the central entry says the local header is; None for where it was written."""
    write_local: bool = True
    extra: bytes = field(default=b"")

    def encoded_name(self, name: str) -> bytes:
        return name.encode("utf-8" if self.flags & FLAG_UTF8 else "cp437")


def build_zip(entries: Sequence[Entry], *, count: int | None = None,
              zip64_count: int | None = None, prefix: bytes = b"",
              comment: bytes = b"") -> bytes:
    """Assemble local headers, data, the central directory and the end record.

    Args:
        entries: the members, in file order.
        count: the member count the end record declares (default: the truth).
        zip64_count: write a zip64 end record declaring this many members and
            mark the classic record's count as 0xFFFF.
        prefix: bytes before the first local header.
        comment: the archive comment.
    """
    out = bytearray(prefix)
    offsets: list[int] = []
    for entry in entries:
        offsets.append(len(out))
        if not entry.write_local:
            continue
        compressed = len(entry.data) if entry.compressed is None else entry.compressed
        uncompressed = len(entry.data) if entry.uncompressed is None else entry.uncompressed
        name = entry.encoded_name(entry.name)
        if entry.zip64:
            compressed = uncompressed = ZIP64_MARK
        out += LOCAL.pack(b"PK\x03\x04", 20, entry.flags, entry.method, 0, 0, 0,
                          compressed, uncompressed, len(name), 0)
        out += name + entry.data
    directory_start = len(out)
    for entry, written_at in zip(entries, offsets, strict=True):
        name = entry.encoded_name(entry.central_name if entry.central_name is not None
                                  else entry.name)
        compressed = _pick(entry.central_compressed, entry.compressed, len(entry.data))
        uncompressed = _pick(entry.central_uncompressed, entry.uncompressed, len(entry.data))
        offset = written_at if entry.offset is None else entry.offset
        extra = entry.extra
        if entry.zip64:
            extra += struct.pack("<HHQQ", 1, 16, uncompressed, compressed)
            compressed = uncompressed = ZIP64_MARK
        out += CENTRAL.pack(
            b"PK\x01\x02", entry.made_by, 20,
            entry.flags if entry.central_flags is None else entry.central_flags,
            entry.method if entry.central_method is None else entry.central_method,
            0, 0, 0, compressed, uncompressed, len(name), len(extra), 0, 0, 0,
            entry.external, offset,
        )
        out += name + extra
    directory_size = len(out) - directory_start
    declared = len(entries) if count is None else count
    if zip64_count is not None:
        end64_at = len(out)
        out += EOCD64.pack(b"PK\x06\x06", EOCD64.size - 12, 45, 45, 0, 0, zip64_count,
                           zip64_count, directory_size, directory_start)
        out += EOCD64_LOCATOR.pack(b"PK\x06\x07", 0, end64_at, 1)
        declared = 0xFFFF
    out += EOCD.pack(b"PK\x05\x06", 0, 0, min(declared, 0xFFFF), min(declared, 0xFFFF),
                     directory_size, directory_start, len(comment))
    out += comment
    return bytes(out)


def _pick(central: int | None, local: int | None, default: int) -> int:
    if central is not None:
        return central
    return default if local is None else local


def real_zip(members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A well-formed zip written by the standard library."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def ooxml(main_part: str, extra: dict[str, bytes] | None = None) -> bytes:
    """The skeleton of an OOXML package whose main part is `main_part`."""
    members = {"[Content_Types].xml": b"<Types/>", main_part: b"<doc/>"}
    members.update(extra or {})
    return real_zip(members)
