"""OLE compound files (MS-CFB) written in code: honest ones, and ones that lie.

Nothing on PyPI writes an Outlook ``.msg``, and the hostile tests need compound
files whose tables loop, overlap or declare sizes the file cannot hold, so this
module writes version-3 files (512-byte sectors, 64-byte mini sectors) itself.
`outlook_message` builds a small MS-OXMSG message with attachments on top.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
SECTOR = 512
MINI = 64
CUTOFF = 4096
FREE, END, FAT_MARK = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
NONE = 0xFFFFFFFF


def _sort_key(name: str) -> tuple[int, str]:
    return len(name), name.upper()


def compound_file(streams: Mapping[tuple[str, ...], bytes]) -> bytes:
    """A compound file holding `streams`, each named by its storage path.

    ``{("WordDocument",): b"...", ("__attach_version1.0_#00000000", "x"): b"..."}``;
    storages are made for every path prefix. Siblings are linked in sorted order
    through their right-sibling pointers (a valid, if unbalanced, tree).
    """
    # the directory: index 0 is the root
    entries: list[dict[str, object]] = [{"name": "Root Entry", "type": 5, "children": []}]
    by_path: dict[tuple[str, ...], int] = {(): 0}
    for path in sorted(streams):
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            if prefix in by_path:
                continue
            is_stream = depth == len(path)
            by_path[prefix] = len(entries)
            entries.append({"name": prefix[-1], "type": 2 if is_stream else 1,
                            "children": [], "data": streams[path] if is_stream else b""})
            children = entries[by_path[prefix[:-1]]]["children"]
            assert isinstance(children, list)
            children.append(by_path[prefix])
    # stream placement: small ones in the mini stream, the rest in sectors of their own
    mini_stream = bytearray()
    mini_fat: list[int] = []
    big: list[tuple[int, bytes]] = []
    for index, entry in enumerate(entries):
        data = entry.get("data", b"")
        assert isinstance(data, bytes)
        if entry["type"] != 2:
            continue
        if len(data) < CUTOFF:
            first = len(mini_stream) // MINI
            count = max(1, -(-len(data) // MINI)) if data else 0
            entry["start"] = first if data else END
            for k in range(count):
                mini_fat.append(first + k + 1 if k + 1 < count else END)
            mini_stream += data.ljust(count * MINI, b"\x00")
        else:
            big.append((index, data))
    directory_sectors = -(-len(entries) * 128 // SECTOR)
    minifat_sectors = -(-len(mini_fat) * 4 // SECTOR) if mini_fat else 0
    ministream_sectors = -(-len(mini_stream) // SECTOR)
    big_sectors = sum(-(-len(data) // SECTOR) for _, data in big)
    body = directory_sectors + minifat_sectors + ministream_sectors + big_sectors
    fat_sectors = 1
    while fat_sectors * (SECTOR // 4) < body + fat_sectors:
        fat_sectors += 1
    assert fat_sectors <= 109, "no DIFAT sectors in this writer"
    fat = [FREE] * (fat_sectors * SECTOR // 4)
    next_free = 0

    def allocate(count: int) -> int:
        nonlocal next_free
        if count == 0:
            return END
        first = next_free
        for k in range(count):
            fat[first + k] = first + k + 1 if k + 1 < count else END
        next_free += count
        return first

    for k in range(fat_sectors):
        fat[k] = FAT_MARK
    next_free = fat_sectors
    dir_start = allocate(directory_sectors)
    minifat_start = allocate(minifat_sectors)
    ministream_start = allocate(ministream_sectors)
    payloads: dict[int, bytes] = {}
    for index, data in big:
        count = -(-len(data) // SECTOR)
        entries[index]["start"] = allocate(count)
        payloads[entries[index]["start"]] = data  # type: ignore[index]
    entries[0]["start"] = ministream_start if mini_stream else END
    entries[0]["size"] = len(mini_stream)
    for entry in entries[1:]:
        data = entry.get("data", b"")
        entry["size"] = len(data) if isinstance(data, bytes) else 0
        entry.setdefault("start", 0 if entry["type"] == 1 else END)
    # sibling chains
    links: dict[int, tuple[int, int]] = {}
    for entry in entries:
        children = entry["children"]
        assert isinstance(children, list)
        ordered = sorted(children, key=lambda i: _sort_key(str(entries[i]["name"])))
        entry["child"] = ordered[0] if ordered else NONE
        for position, index in enumerate(ordered):
            links[index] = (NONE, ordered[position + 1] if position + 1 < len(ordered) else NONE)
    directory = bytearray()
    for index, entry in enumerate(entries):
        name = str(entry["name"]).encode("utf-16-le")[:62]
        left, right = links.get(index, (NONE, NONE))
        directory += struct.pack(
            "<64sHBBIII16sIQQIQ", name.ljust(64, b"\x00"), len(name) + 2, entry["type"], 1,
            left, right, entry["child"], b"\x00" * 16, 0, 0, 0, entry["start"], entry["size"])
    directory = directory.ljust(directory_sectors * SECTOR, b"\x00")
    header = struct.pack("<8s16sHHHHH6sIIIIIIIII", MAGIC, b"\x00" * 16, 0x3E, 3, 0xFFFE, 9, 6,
                         b"\x00" * 6, 0, fat_sectors, dir_start, 0, CUTOFF,
                         minifat_start if minifat_sectors else END, minifat_sectors, END, 0)
    difat = list(range(fat_sectors)) + [FREE] * (109 - fat_sectors)
    header += struct.pack("<109I", *difat)
    sectors = [b""] * next_free
    for k in range(fat_sectors):
        sectors[k] = struct.pack(f"<{SECTOR // 4}I", *fat[k * 128:(k + 1) * 128])
    for k in range(directory_sectors):
        sectors[dir_start + k] = bytes(directory[k * SECTOR:(k + 1) * SECTOR])
    packed_minifat = struct.pack(f"<{len(mini_fat)}I", *mini_fat).ljust(
        minifat_sectors * SECTOR, b"\xff")
    for k in range(minifat_sectors):
        sectors[minifat_start + k] = packed_minifat[k * SECTOR:(k + 1) * SECTOR]
    padded_mini = bytes(mini_stream).ljust(ministream_sectors * SECTOR, b"\x00")
    for k in range(ministream_sectors):
        sectors[ministream_start + k] = padded_mini[k * SECTOR:(k + 1) * SECTOR]
    for start, data in payloads.items():
        padded = data.ljust(-(-len(data) // SECTOR) * SECTOR, b"\x00")
        for k in range(len(padded) // SECTOR):
            sectors[start + k] = padded[k * SECTOR:(k + 1) * SECTOR]
    return header + b"".join(s.ljust(SECTOR, b"\x00") for s in sectors)


def _unicode(pid: int) -> str:
    return f"__substg1.0_{pid:04X}001F"


def _properties(header: bytes, fixed: list[tuple[int, int, bytes]]) -> bytes:
    """A ``__properties_version1.0`` stream: its header, then 16-byte entries."""
    body = b"".join(struct.pack("<II8s", tag, flags, value.ljust(8, b"\x00"))
                    for tag, flags, value in fixed)
    return header + body


def outlook_message(subject: str, body: str, sender: str,
                    attachments: list[tuple[str, str, bytes]] = ()) -> bytes:  # type: ignore[assignment]
    """A small Outlook message (MS-OXMSG): subject, plain body, sender, attachments by value."""
    streams: dict[tuple[str, ...], bytes] = {}
    texts = {0x001A: "IPM.Note", 0x0037: subject, 0x1000: body, 0x0C1F: sender,
             0x0C1A: sender.split("@")[0]}
    entries = []
    for pid, value in texts.items():
        data = value.encode("utf-16-le")  # the size counts a terminator the stream lacks
        streams[(_unicode(pid),)] = data
        entries.append(((pid << 16) | 0x001F, 6, struct.pack("<I", len(data) + 2)))
    header = struct.pack("<8sIIII8s", b"\x00" * 8, 0, len(attachments), 0, len(attachments),
                         b"\x00" * 8)
    streams[("__properties_version1.0",)] = _properties(header, entries)
    for number, (name, media_type, data) in enumerate(attachments):
        storage = f"__attach_version1.0_#{number:08X}"
        attach = [(0x37050003, 6, struct.pack("<I", 1))]  # PidTagAttachMethod: afByValue
        for pid, value in ((0x3707, name), (0x3704, name), (0x370E, media_type)):
            encoded = value.encode("utf-16-le")
            streams[(storage, _unicode(pid))] = encoded
            attach.append(((pid << 16) | 0x001F, 6, struct.pack("<I", len(encoded) + 2)))
        streams[(storage, "__substg1.0_37010102")] = data
        attach.append((0x37010102, 6, struct.pack("<I", len(data))))
        streams[(storage, "__properties_version1.0")] = _properties(b"\x00" * 8, attach)
    return compound_file(streams)
