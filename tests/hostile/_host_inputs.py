"""Hostile inputs for the checks that run in the application's own process, built in code.

Each builder makes the smallest file that drives one host-side check (the
compound-file directory read, the zip pre-scan, the light path) into the
shape under test; sizes are parameters so a test can compare a file with
one four times its size.
"""

from __future__ import annotations

import io
import random
import struct
import tracemalloc
import zipfile
from collections.abc import Callable

from capsa.errors import CapsaError
from capsa.guard.archive import OLE_MAGIC

SECTOR = 512
_END = 0xFFFFFFFE
_FREE = 0xFFFFFFFF
_OUTSIDE = 0x01234567
"""A sector number past any test file: a chain that reaches it is refused there."""


def _cfb_header(*, fat_count: int, dir_start: int, difat_start: int, difat_count: int,
                header_difat: list[int]) -> bytes:
    """A version-3 compound-file header (512-byte sectors) with the given tables."""
    head = bytearray(SECTOR)
    struct.pack_into("<8s16sHHHHH6sIIIIIIIII", head, 0, OLE_MAGIC, bytes(16), 0x3E, 3,
                     0xFFFE, 9, 6, bytes(6), 0, fat_count, dir_start, 0, 4096, _END, 0,
                     difat_start, difat_count)
    slots = header_difat[:109] + [_FREE] * (109 - len(header_difat[:109]))
    struct.pack_into("<109I", head, 0x4C, *slots)
    return bytes(head)


def cfb_difat_loop(sectors: int) -> bytes:
    """A compound file whose one DIFAT sector names itself as the next, its header
    declaring as many DIFAT sectors as the file has: a reader that follows the chain
    until the count runs out reads the same 127 entries `sectors` times."""
    body = bytearray(sectors * SECTOR)
    struct.pack_into("<128I", body, 0, *([_OUTSIDE] * 127 + [0]))
    return _cfb_header(fat_count=0, dir_start=1, difat_start=0, difat_count=sectors,
                       header_difat=[]) + bytes(body)


def cfb_one_fat_sector_listed_everywhere(sectors: int) -> bytes:
    """A compound file whose DIFAT names one sector as every allocation-table sector:
    an honest chain of ``sectors - 2`` DIFAT sectors, each listing the last sector
    127 times, so a reader that loads every listed FAT sector holds ``127 * sectors``
    entries read from one 512-byte sector."""
    fat_sector = sectors - 1
    difat = sectors - 2
    body = bytearray(sectors * SECTOR)
    for number in range(difat):
        following = number + 1 if number + 1 < difat else _END
        struct.pack_into("<128I", body, number * SECTOR, *([fat_sector] * 127 + [following]))
    struct.pack_into("<128I", body, fat_sector * SECTOR, *([_OUTSIDE] * 128))
    return _cfb_header(fat_count=min(109 + 127 * difat, sectors), dir_start=difat,
                       difat_start=0, difat_count=difat,
                       header_difat=[fat_sector] * 109) + bytes(body)


def zip_member_named(name: str) -> bytes:
    """A zip of one stored member whose name is `name` (refused for it, or not)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, b"x")
    return buffer.getvalue()


def zip_of_stored_zips(archives: int, members_each: int) -> bytes:
    """A zip of `archives` stored inner zips of `members_each` empty members each:
    every inner member is a central-directory entry a pre-scan parses."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_STORED) as archive:
        for number in range(members_each):
            archive.writestr(f"{number:x}", b"")
    outer = io.BytesIO()
    with zipfile.ZipFile(outer, "w", zipfile.ZIP_STORED) as archive:
        for number in range(archives):
            archive.writestr(f"inner-{number}.zip", inner.getvalue())
    return outer.getvalue()


def docx_declaring(uncompressed: int) -> bytes:
    """A DOCX-shaped zip of about 1/90 of `uncompressed` whose members declare
    `uncompressed` bytes: zeros in 1 MiB members (each under the ratio floor) and one
    stored member of random bytes that keeps the whole archive's ratio under 100."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")
        archive.writestr(zipfile.ZipInfo("word/media/noise.bin"),
                         random.Random(0).randbytes(uncompressed // 90))
        for number in range(uncompressed // (1 << 20)):
            archive.writestr(f"word/media/zeros-{number}.bin", bytes(1 << 20))
    return buffer.getvalue()


def traced(action: Callable[[], object]) -> tuple[object, int]:
    """What `action` returned, or the capsa error it raised, and the most bytes
    Python held at once meanwhile (tracemalloc: a count of bytes, not of time)."""
    tracemalloc.start()
    try:
        try:
            outcome = action()
        except CapsaError as error:
            outcome = error
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return outcome, peak
