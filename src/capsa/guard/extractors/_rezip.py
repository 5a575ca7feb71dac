"""A zip package written again with some members replaced, for a converter to read.

EPUB and ODT have their hidden text taken out before pandoc reads them
(`capsa.guard.extractors._epub_hidden`, `capsa.guard.extractors._odt_hidden`):
both read members through the inspected archive and hand pandoc a package that
differs only in the members they rewrote.
"""

from __future__ import annotations

import io
import zipfile

from capsa.guard.extractors._floors import refuse

__all__ = ["read_member", "rezipped"]

_MIMETYPE = "mimetype"
_DATE = (1980, 1, 1, 0, 0, 0)


def read_member(archive: zipfile.ZipFile, name: str) -> bytes:
    """One member of an inspected archive, read whole (never past its checked size)."""
    info = archive.getinfo(name)
    with archive.open(info) as member:
        return member.read(info.file_size + 1)


def rezipped(archive: zipfile.ZipFile, replaced: dict[str, bytes], *, max_bytes: int) -> bytes:
    """`archive` again with the members in `replaced` swapped in, in the same order.

    The ``mimetype`` member goes first and stored, as EPUB and ODF readers
    require; every other member keeps its order and is stored or deflated as it
    was. Dates are fixed, so the same input gives the same bytes.

    Args:
        archive: an archive opened by `capsa.guard.archive.open_inspected`.
        replaced: new contents by member name.
        max_bytes: the most the members may hold, uncompressed
            (``max_uncompressed_bytes``); a rewritten member can be longer than
            the one it replaces (``>`` written out as ``&gt;``).

    Raises:
        IngestionRejected: ``archive_too_large`` past `max_bytes`.
    """
    infos = archive.infolist()
    ordered = ([info for info in infos if info.filename == _MIMETYPE]
               + [info for info in infos if info.filename != _MIMETYPE])
    total = 0
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        for info in ordered:
            data = replaced.get(info.filename)
            if data is None:
                data = read_member(archive, info.filename)
            total += len(data)
            if total > max_bytes:
                raise refuse("archive_too_large",
                             f"with its hidden text taken out, the package's members hold more "
                             f"than {max_bytes} bytes (max_uncompressed_bytes)")
            stored = info.filename == _MIMETYPE or info.compress_type == zipfile.ZIP_STORED
            package.writestr(zipfile.ZipInfo(info.filename, _DATE), data,
                             compress_type=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return out.getvalue()
