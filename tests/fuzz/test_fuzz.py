"""Fuzzing sniff and archive inspection: only IngestionRejected escapes, memory stays bounded.

Inputs are random bytes, random bytes behind a real magic number, and valid
zips, OOXML and EPUB files mutated byte by byte and field by field (sizes,
counts, offsets and name lengths overwritten with edge values). Every call
runs under `tracemalloc`; its peak must stay under ten times the input plus
1 MiB, so a 200-byte file can never make the guard allocate what it declares.

``make test`` runs a fixed, derandomised 300 examples per property. Set
``CAPSA_FUZZ_EXAMPLES`` to run longer with fresh randomness (``make fuzz``
uses 20 000); failures found that way are saved in Hypothesis's database and
replayed first next time.
"""

from __future__ import annotations

import contextlib
import io
import os
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capsa.errors import IngestionRejected, RejectionReason
from capsa.guard import ExtractionLimits, inspect_archive, sniff
from capsa.guard.archive import read_directory
from capsa.guard.samples import SAMPLES
from capsa.guard.sniff import Kind

_MiB = 1024 * 1024
_LONG = os.environ.get("CAPSA_FUZZ_EXAMPLES")
_FUZZ = settings(
    max_examples=int(_LONG) if _LONG else 300,
    derandomize=not _LONG,
    database=settings.default.database if _LONG else None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_KINDS: frozenset[str] = frozenset(Kind.__args__)  # type: ignore[attr-defined]
_REASONS: frozenset[str] = frozenset(RejectionReason.__args__)  # type: ignore[attr-defined]
_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"%PDF-", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff",
           b"II*\x00", b"RIFF\0\0\0\0WEBP", b"GIF89a", b"{\\rtf", b"%!PS",
           b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff",
           b"\xff\xfe\x00\x00", b"<!DOCTYPE html>", b"From: a\nTo: b\n")
_LIMITS = (ExtractionLimits(), ExtractionLimits(max_nesting_depth=0, max_members=8),
           ExtractionLimits(max_nesting_depth=3, ratio_floor_bytes=1, max_expansion_ratio=2))

# Header fields worth overwriting: (signature, offsets of its fields and their widths).
_FIELDS = {
    b"PK\x03\x04": ((6, 2), (8, 2), (18, 4), (22, 4), (26, 2), (28, 2)),
    b"PK\x01\x02": ((4, 2), (8, 2), (10, 2), (20, 4), (24, 4), (28, 2), (30, 2), (32, 2),
                    (34, 2), (38, 4), (42, 4)),
    b"PK\x05\x06": ((4, 2), (6, 2), (8, 2), (10, 2), (12, 4), (16, 4), (20, 2)),
    b"PK\x06\x06": ((24, 8), (32, 8), (40, 8), (48, 8)),
    b"PK\x06\x07": ((8, 8),),
}


def _zip(members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED,
         zip64: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            with archive.open(name, "w", force_zip64=zip64) as member:
                member.write(data)
    return buffer.getvalue()


def _seeds() -> list[bytes]:
    ooxml = _zip({"[Content_Types].xml": b"<Types/>", "_rels/.rels": b"<Relationships/>",
                  "word/document.xml": b"<w:document><w:body>hello</w:body></w:document>"})
    inner = _zip({"note.txt": b"inside"}, method=zipfile.ZIP_STORED)
    return [
        _zip({"a.txt": b"alpha " * 50, "b/c.csv": b"x,y\n1,2\n", "d.json": b"{}"}),
        ooxml,
        SAMPLES["epub"](),
        _zip({"big.txt": b"z" * 4000}, zip64=True),
        _zip({"inner.zip": inner, "readme.txt": b"outer"}, method=zipfile.ZIP_STORED),
        _zip({f"m{i:03d}.txt": b"" for i in range(300)}, method=zipfile.ZIP_STORED),
    ]


_SEEDS = _seeds()


@st.composite
def _mutated_zips(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(_SEEDS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        op = draw(st.sampled_from(["field", "field", "field", "field", "flip", "insert", "delete",
                                   "truncate", "duplicate"]))
        pos = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        if op == "field":
            _overwrite_field(draw, data)
        elif op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(max_size=64))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(min_value=1, max_value=64))]
        elif op == "truncate":
            del data[pos:]
        elif op == "duplicate":
            size = draw(st.integers(min_value=1, max_value=128))
            where = draw(st.integers(min_value=0, max_value=len(data)))
            data[where:where] = data[pos:pos + size]
    return bytes(data)


def _overwrite_field(draw: st.DrawFn, data: bytearray) -> None:
    spots = [(at, fields) for signature, fields in _FIELDS.items()
             for at in _occurrences(data, signature)]
    if not spots:
        return
    at, fields = draw(st.sampled_from(spots))
    offset, width = draw(st.sampled_from(fields))
    top = (1 << (8 * width)) - 1
    value = draw(st.one_of(st.sampled_from([0, 1, 2, 0xFFFF, top, top >> 1, top - 1]),
                           st.integers(min_value=0, max_value=top)))
    if at + offset + width <= len(data):
        data[at + offset:at + offset + width] = value.to_bytes(width, "little")


def _occurrences(data: bytearray, signature: bytes) -> Iterator[int]:
    at = data.find(signature)
    while at >= 0:
        yield at
        at = data.find(signature, at + 1)


_random_bytes = st.binary(max_size=4096)
_magic_bytes = st.builds(lambda magic, tail: magic + tail, st.sampled_from(_MAGICS),
                         st.binary(max_size=2048))
_anything = st.one_of(_random_bytes, _magic_bytes, _mutated_zips())


@pytest.fixture(scope="module", autouse=True)
def _trace_allocations() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _peak_while(call: Callable[[], object]) -> int:
    """Bytes allocated at the peak of `call`, beyond what was live before it."""
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    with contextlib.suppress(IngestionRejected):
        call()
    _, peak = tracemalloc.get_traced_memory()
    return peak - before


def _bound(payload: bytes) -> int:
    return 10 * len(payload) + _MiB


def test_fuzz_seeds_are_valid_archives_the_guard_accepts() -> None:
    for seed in _SEEDS:
        inspect_archive(seed, ExtractionLimits(), label="seed.zip")
    assert [sniff(seed) for seed in _SEEDS[:3]] == ["zip", "docx", "epub"]


@_FUZZ
@given(_anything)
def test_sniff_names_a_kind_and_never_raises(payload: bytes) -> None:
    kinds: list[str] = []
    peak = _peak_while(lambda: kinds.append(sniff(payload)))
    assert kinds and kinds[0] in _KINDS
    assert peak <= _bound(payload)


@_FUZZ
@given(_anything, st.sampled_from(_LIMITS))
def test_inspect_archive_only_refuses_and_stays_bounded(payload: bytes,
                                                        limits: ExtractionLimits) -> None:
    peak = _peak_while(lambda: inspect_archive(payload, limits, label="fuzz.zip"))
    assert peak <= _bound(payload)


@_FUZZ
@given(_mutated_zips(), st.integers(min_value=0, max_value=400))
def test_read_directory_only_refuses_and_respects_max_members(payload: bytes,
                                                             max_members: int) -> None:
    found: list[int] = []
    peak = _peak_while(lambda: found.append(len(read_directory(payload,
                                                               max_members=max_members)[0])))
    assert not found or found[0] <= max_members
    assert peak <= _bound(payload)


@_FUZZ
@given(_mutated_zips())
def test_inspect_archive_refusals_carry_a_known_reason_and_the_label(payload: bytes) -> None:
    refusals: list[IngestionRejected] = []
    try:
        inspect_archive(payload, ExtractionLimits(), label="q3.docx")
    except IngestionRejected as refusal:
        refusals.append(refusal)
    for refusal in refusals:
        assert (refusal.label, refusal.stage) == ("q3.docx", "archive")
        assert refusal.reason in _REASONS
        assert refusal.detail


@_FUZZ
@given(_mutated_zips())
def test_sniff_keeps_anything_with_zip_magic_in_the_zip_family(payload: bytes) -> None:
    if payload.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        assert sniff(payload) in {"zip", "docx", "pptx", "xlsx", "epub"}
