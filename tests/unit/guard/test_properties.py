"""Invariants of the guard's pure functions, checked on generated input with Hypothesis.

- `safe_label` always returns a short, single, printable, path-free line.
- `normalize` is idempotent and its output always encodes to UTF-8.
- `inspect_archive`, `read_directory` and `sniff` raise nothing but
  `IngestionRejected` on any bytes, including mutated real zips.
- `decode_text` raises nothing but `UndecodableText`.
- rendered attachments can never close their own container.
- `extract_all` accounts for every input, never truncates, keeps its ceilings.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capsa.errors import IngestionRejected
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    Omission,
    extract_all,
    inspect_archive,
    normalize,
    render_blocks,
    safe_label,
    sniff,
)
from capsa.guard.archive import read_directory
from capsa.guard.extractors import PlainTextExtractor, Router
from capsa.guard.labels import MAX_LABEL_CHARS
from capsa.guard.normalize import UndecodableText, decode_text
from capsa.guard.samples import (
    ZipEntry,
    build_zip,
    ooxml_skeleton,
    zip_of,
    zip_with_zip64_end,
)
from capsa.guard.sniff import Kind

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
LABEL_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
TEXT_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
HOSTILE_CHARS = list(
    "./\\ \t\n\r\x00\x1b\x7f\x85\u00a0\u1680\u3000\u200b\u200d\u202e\u2066\ufeff\u2028\u2029"
    "\ue000\u0378\ud800\udfff\uff0e\uff0f\uff3c\ufe68\u2024\u2025\u2026\u0301\u0308e\u00e9"
    "\ufb01\U000e0041\U0001f600:~<>\"'&"
)
hostile_text = st.text(st.one_of(st.characters(), st.sampled_from(HOSTILE_CHARS)), max_size=300)
long_text = st.text(st.one_of(st.characters(), st.sampled_from(HOSTILE_CHARS)),
                    min_size=240, max_size=600)
any_text = st.one_of(hostile_text, long_text)

ZIP_BASES = (
    zip_of({"a.txt": b"hello " * 40, "dir/b.xml": b"<x/>"}),
    zip_of({"inner.zip": zip_of({"x.txt": b"hi"}), "d.txt": b"d"}, stored=True),
    ooxml_skeleton("word/document.xml", {"word/media/image1.png": b"\x89PNG" + b"\x00" * 40}),
    build_zip([ZipEntry("big.bin", b"x" * 40, declared_size=40, zip64=True, method=0)]),
    zip_with_zip64_end(build_zip([ZipEntry("a", b"x", method=0), ZipEntry("b", b"y", method=0)]),
                       count=2, mark_classic=True),
)


@st.composite
def mutated_zips(draw: st.DrawFn) -> bytes:
    """A real zip with a few bytes flipped, set, inserted or deleted."""
    data = bytearray(draw(st.sampled_from(ZIP_BASES)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data) - 1))
        operation = draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        if operation == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif operation == "set":
            data[at] = draw(st.sampled_from([0x00, 0xFF, 0x50, 0x4B, 0x01, 0x02, 0x05, 0x06]))
        elif operation == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at:at + draw(st.integers(1, 16))]
    return bytes(data)


any_bytes = st.one_of(
    st.binary(max_size=2048),
    st.binary(max_size=512).map(lambda b: b"PK\x03\x04" + b),
    st.binary(max_size=512).map(lambda b: b + b"PK\x05\x06" + bytes(18)),
    mutated_zips(),
)


# labels


@given(any_text, st.integers(min_value=0, max_value=10**9))
def test_safe_label_output_is_always_safe(raw: str, index: int) -> None:
    label = safe_label(raw, index=index)

    assert label
    assert len(label) <= MAX_LABEL_CHARS
    assert "/" not in label and "\\" not in label
    assert label not in {".", ".."}
    assert not [ch for ch in label if unicodedata.category(ch) in LABEL_UNSAFE]
    assert all(ch == " " for ch in label if ch.isspace())
    assert "  " not in label
    assert label == label.strip()
    assert unicodedata.is_normalized("NFC", label)


@given(any_text)
def test_safe_label_is_idempotent(raw: str) -> None:
    label = safe_label(raw)

    assert safe_label(label) == label


@given(hostile_text)
def test_safe_label_keeps_a_short_safe_name_unchanged(stem: str) -> None:
    clean = re.sub(r"[^A-Za-z0-9 _-]", "", stem).strip()
    name = (re.sub(" +", " ", clean) or "x")[:200] + ".txt"

    assert safe_label(name) == name


# normalisation


@given(any_text)
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize(text)

    assert normalize(once) == once


@given(any_text)
def test_normalize_output_is_clean_prompt_text(text: str) -> None:
    out = normalize(text)

    out.encode("utf-8")
    assert "\r" not in out
    assert not [ch for ch in out if ch not in "\t\n" and unicodedata.category(ch) in TEXT_UNSAFE]
    assert not re.search(r"[ \t]$", out, re.MULTILINE)
    assert "\n\n\n\n" not in out
    assert out == out.strip("\n")
    assert unicodedata.is_normalized("NFC", out)


# archives and sniffing never raise anything untyped


@FUZZ
@given(any_bytes)
def test_inspect_archive_raises_only_ingestion_rejected(payload: bytes) -> None:
    try:
        inspect_archive(payload, ExtractionLimits(), label="fuzz.zip")
    except IngestionRejected as error:
        refused = error
    else:
        return
    assert (refused.label, refused.stage) == ("fuzz.zip", "archive")


@FUZZ
@given(any_bytes)
def test_read_directory_raises_only_ingestion_rejected(payload: bytes) -> None:
    try:
        members, start = read_directory(payload, max_members=1024)
    except IngestionRejected as error:
        refused: IngestionRejected | None = error
    else:
        refused = None
        assert len(members) <= 1024
        assert 0 <= start <= len(payload)
    assert refused is None or refused.stage == "archive"


@FUZZ
@given(any_bytes)
def test_sniff_always_names_a_kind(payload: bytes) -> None:
    assert sniff(payload) in get_args(Kind)


# decoding


@FUZZ
@given(st.one_of(st.binary(max_size=1024),
                 st.binary(max_size=512).map(lambda b: b"\xef\xbb\xbf" + b),
                 st.binary(max_size=512).map(lambda b: b"\xff\xfe" + b),
                 st.binary(max_size=512).map(lambda b: b"\xfe\xff" + b),
                 st.binary(max_size=512).map(lambda b: b"\xff\xfe\x00\x00" + b)))
def test_decode_text_raises_only_undecodable_text(payload: bytes) -> None:
    try:
        text = decode_text(payload)
    except UndecodableText:
        return
    assert isinstance(text, str)


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00\ufeff"), max_size=300))
def test_decode_text_returns_valid_utf8_unchanged(text: str) -> None:
    assert decode_text(text.encode("utf-8")) == text


# the prompt container


@given(st.lists(st.tuples(any_text, any_text), max_size=5))
def test_rendered_files_can_never_close_their_container(files: list[tuple[str, str]]) -> None:
    docs = [Extracted(label=label, kind="text", media_type=None, text=text, byte_size=0,
                      sha256="0") for label, text in files]

    rendered = render_blocks(docs)

    assert rendered.count("<attachment ") == len(docs)
    assert rendered.count("</attachment>") == len(docs)
    assert rendered.count("<") == 2 * len(docs)
    bodies = re.findall(r'<attachment name="[^"]*">\n(.*?)\n</attachment>', rendered, re.DOTALL)
    assert [html.unescape(body) for body in bodies] == [text for _, text in files]


# the pipeline over arbitrary sets

media_types = st.one_of(st.none(), st.sampled_from(
    ["text/plain", "text/markdown", "application/pdf", "image/png", "application/zip",
     "text/html; charset=utf-8", "application/octet-stream", "x/unknown"]))
attachments = st.builds(
    Attachment, label=hostile_text, media_type=media_types,
    payload=st.one_of(any_bytes, hostile_text.map(lambda t: t.encode("utf-8", "replace"))),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(attachments, max_size=6))
def test_extract_all_accounts_for_every_file_and_keeps_its_ceilings(
    files: list[Attachment],
) -> None:
    limits = ExtractionLimits(max_bytes=1500, max_text_chars=200, max_total_chars=300)
    outcomes: dict[int, Extracted | Omission] = {}

    result = extract_all(files, Router([PlainTextExtractor()]), limits,
                         on_outcome=outcomes.__setitem__)

    assert sorted(outcomes) == list(range(len(files)))
    assert len(result.extracted) + len(result.omitted) == len(files)
    assert sum(len(doc.text) for doc in result.extracted) <= limits.max_total_chars
    for index, outcome in outcomes.items():
        assert outcome.label == safe_label(files[index].label, index=index)
        if isinstance(outcome, Extracted):
            assert 0 < len(outcome.text) <= limits.max_text_chars
            assert outcome.text == normalize(decode_text(files[index].payload))
            outcome.text.encode("utf-8")
