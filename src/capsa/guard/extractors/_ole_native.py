"""The file an embedded OLE object wraps, taken out of its container.

Office embeds a file of a kind it has no object server for (a PDF dropped
onto a page, a text file, a zip) as a packager object: an ``oleObject1.bin``
compound file whose ``\\x01Ole10Native`` stream holds the file's label, its
original path and its bytes. A PDF embedded through Acrobat's object server
sits whole in a ``CONTENTS`` stream instead. capsa cannot read a compound
file that is no .doc, .xls, .ppt or .msg, so such an object was an omission
(``unsupported_type``) though the file inside it is one capsa reads.

`unwrapped` returns that file and its name. The packager's stream is laid
out as: its size, a flag word of 2, the label and the original path (each
ended by a zero byte), two reserved words, a length and the temporary path,
then the file's size and its bytes. Every
length is checked against what the stream holds; a stream that is laid out
any other way, or a container that wraps neither, is handed back as it is,
and stays an omission with its reason. Runs in the parser's sandbox, on a
part the archive inspection has already bounded.
"""

from __future__ import annotations

import io
import ntpath
import posixpath
import struct

__all__ = ["unwrapped"]

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAX_NAME = 4096
"""The longest label or path read (Windows paths are far shorter)."""


def unwrapped(name: str, payload: bytes) -> tuple[str, bytes] | None:
    """The (name, bytes) of the file the compound file `payload` wraps; None when it wraps
    none that can be read out (it is then handed back as it is)."""
    if not payload.startswith(_OLE_MAGIC):
        return None
    try:
        import olefile

        with olefile.OleFileIO(io.BytesIO(payload)) as container:
            if container.exists("\x01Ole10Native"):
                return _package(container.openstream("\x01Ole10Native").read())
            if container.exists("CONTENTS"):
                contents: bytes = container.openstream("CONTENTS").read()
                if contents.startswith(b"%PDF-"):
                    return f"{posixpath.splitext(name)[0] or 'object'}.pdf", contents
    except Exception:  # noqa: BLE001 - a broken container is handed back whole, and refused
        return None
    return None


def _package(stream: bytes) -> tuple[str, bytes] | None:
    """A packager stream's label and file; None when it is not laid out as one."""
    try:
        (flags,) = struct.unpack_from("<H", stream, 4)
        if flags != 2:
            return None
        label, at = _text(stream, 6)
        path, at = _text(stream, at)
        at += 4  # two reserved words
        (length,) = struct.unpack_from("<I", stream, at)
        at += 4 + length  # the temporary path the packager copied the file to
        (size,) = struct.unpack_from("<I", stream, at)
        at += 4
    except (struct.error, ValueError):
        return None
    if length > _MAX_NAME or at + size > len(stream):
        return None
    name = ntpath.basename(label) or ntpath.basename(path) or "object"
    return name, stream[at:at + size]


def _text(stream: bytes, at: int) -> tuple[str, int]:
    """The zero-ended string at `at`, and where the next field starts."""
    end = stream.find(b"\x00", at, at + _MAX_NAME)
    if end < 0:
        raise ValueError("no end to a label or path")
    return stream[at:end].decode("cp1252", "replace"), end + 1
