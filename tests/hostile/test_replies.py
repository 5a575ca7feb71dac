"""The application's side of the boundary holds against whatever a child sends back.

A child a crafted file has taken over controls every byte of its reply and
every embedded file it reports. These tests play that child
(`hostile._reply_probes.ReplyProbeExtractor`) and check what the issue asked
of the application side: replies read in linear time and bounded memory
(the bytes on the wire are the text's own UTF-8, never re-encoded), a reply
of any shape or depth decoded without `RecursionError` whatever the caller's
stack, every failure typed with the pool still serving, and the files found
inside one file sharing that file's one allowance of count, bytes and time.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from capsa.errors import ExtractionFailed
from capsa.guard import (
    Attachment,
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    Omission,
    extract_all,
    extract_attachment,
)
from capsa.guard.sandbox.protocol import ReplyReader, reply_frame

from ._reply_probes import ReplyProbeExtractor
from .conftest import probes_importable

MiB = 1 << 20
LIMITS = ExtractionLimits(timeout_s=10, cpu_s=10, memory_bytes=512 * MiB)


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    with probes_importable(), IsolatedExtractor(ReplyProbeExtractor(), workers=1) as started:
        yield started


def probe(name: str, **args: Any) -> Attachment:
    return Attachment(label=f"{name}.json", payload=json.dumps({"probe": name, **args}).encode())


def still_serves(pool: IsolatedExtractor) -> None:
    assert extract_attachment(Attachment(label="next.txt", payload=b"the next file"), pool,
                              LIMITS).text == "the next file"


# ------------------------------------------------------------------- size and shape


def test_wide_characters_cost_their_own_utf8_bytes_on_the_wire(
        pool: IsolatedExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    chars = 3 * MiB // 4  # a 3 MiB reply of 4-byte characters
    limits = LIMITS.model_copy(update={"max_text_chars": chars})
    sizes: list[int] = []
    original = ReplyReader.meta

    def spy(self: ReplyReader) -> bytes:
        sizes.append(self.received)
        return original(self)

    monkeypatch.setattr(ReplyReader, "meta", spy)
    text = extract_attachment(probe("wide", chars=chars), pool, limits).text
    assert text == "\U0001f600" * chars
    (received,) = sizes
    assert 4 * chars < received < 4 * chars + 4096  # not 12 bytes a character, as JSON had
    still_serves(pool)


def test_text_over_what_its_limit_allows_is_refused_from_the_header(
        pool: IsolatedExtractor) -> None:
    limits = LIMITS.model_copy(update={"max_text_chars": 1000})
    frame = reply_frame(b'{"ok": true}', b"x" * 5000, b"")
    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(probe("raw", frame=frame.hex()), pool, limits)
    assert failed.value.cause == "protocol"
    assert "over the 4000 its text limit allows" in failed.value.detail
    assert pool.restarts == 0
    still_serves(pool)


def test_a_declared_size_of_an_exabyte_is_refused_before_anything_is_allocated(
        pool: IsolatedExtractor) -> None:
    header = struct.pack(">8sIQQ", b"capsa-r1", 2, 1 << 60, 0)
    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(probe("raw", frame=(header + b"{}").hex()), pool, LIMITS)
    assert failed.value.cause == "protocol"
    still_serves(pool)


def _deep_call(depth: int, then: Any) -> Any:
    return then() if depth == 0 else _deep_call(depth - 1, then)


@pytest.mark.parametrize("opening", [b"[", b'{"a":'])
def test_a_reply_nested_900_deep_is_a_protocol_failure_even_at_the_top_of_a_deep_stack(
        pool: IsolatedExtractor, opening: bytes) -> None:
    closing = b"]" if opening == b"[" else b"}"
    meta = b'{"ok": true, "notes": ' + opening * 900 + b"1" + closing * 900 + b"}"
    frame = reply_frame(meta, b"text", b"")
    room = sys.getrecursionlimit() - len(__import__("inspect").stack()) - 60

    def call() -> ExtractionFailed:
        with pytest.raises(ExtractionFailed) as failed:
            extract_attachment(probe("raw", frame=frame.hex()), pool, LIMITS)
        return failed.value

    failure = _deep_call(room, call)  # the caller sits 60 frames under its recursion limit
    assert failure.cause == "protocol"
    assert "nested deeper than" in failure.detail
    assert pool.restarts == 0
    still_serves(pool)


@pytest.mark.parametrize("frame", [
    b"", b"capsa", b"not the protocol at all, but many bytes" * 100,
    reply_frame(b"[1, 2]", b"", b""), reply_frame(b'{"ok": true}', b"", b"")[:-3],
])
def test_garbage_on_the_reply_pipe_fails_typed_and_the_worker_stays(
        pool: IsolatedExtractor, frame: bytes) -> None:
    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(probe("raw", frame=frame.hex()), pool, LIMITS)
    assert failed.value.cause in ("protocol", "crashed")
    assert pool.restarts == 0
    still_serves(pool)


# ------------------------------------------------------------- embedded files


def text_file(name: str, text: str, media_type: str | None = "text/plain") -> dict[str, Any]:
    return {"name": name, "media_type": media_type, "payload": text}


def test_files_inside_share_one_wall_clock_with_the_file_that_holds_them(
        pool: IsolatedExtractor) -> None:
    # A 48-byte-sized idea: a small file whose parser invents twelve files that
    # each hang. Without a shared allowance that is twelve full timeouts.
    hang = json.dumps({"probe": "sleep", "seconds": 60})
    limits = LIMITS.model_copy(update={"timeout_s": 2.0, "cpu_s": 2})
    files = [text_file(f"hang-{n}.json", hang, "application/json") for n in range(12)]
    result = extract_all([probe("embed", files=files)], pool, limits)
    (parent,) = [e for e in result.extracted if e.parent is None]
    inside = [o for o in result.omitted if o.parent == parent.label]
    assert len(inside) == 12
    assert all(o.reason == "timeout" for o in inside)
    ran_out = [o for o in inside if "shared with the file it was found in" in o.detail]
    assert len(ran_out) >= 10  # at most the first one or two got a child of their own
    still_serves(pool)


def test_files_inside_share_one_count_and_one_byte_allowance(pool: IsolatedExtractor) -> None:
    # Each parse lists no more than max_members, yet the files inside, level by
    # level, add up past it: the allowance is the top-level file's, shared.
    limits = LIMITS.model_copy(update={"max_members": 3, "max_nesting_depth": 2})

    def holder(name: str) -> dict[str, Any]:
        inner = [text_file(f"{name}-{n}.txt", f"{name} part {n}") for n in range(2)]
        return text_file(f"{name}.json", json.dumps({"probe": "embed", "files": inner}),
                         "application/json")

    result = extract_all([probe("embed", files=[holder("a"), holder("b")])], pool, limits)
    extracted = [e.label for e in result.extracted if e.parent is not None]
    refused = [(o.label, o.reason) for o in result.omitted if o.parent is not None]
    assert extracted == ["embed.json/a.json", "embed.json/a.json/a-0.txt",
                         "embed.json/a.json/a-1.txt"]
    assert refused == [("embed.json/b.json", "too_many_members")]

    # bytes: what is left of the allowance bounds the next reply before it is read
    small = LIMITS.model_copy(update={"max_uncompressed_bytes": 10})
    result = extract_all([probe("embed", files=[text_file("a.txt", "12345678"),
                                                text_file("b.txt", "12345678")])], pool, small)
    assert [(o.label, o.stage, o.reason) for o in result.omitted] == [
        ("embed.json", "archive", "archive_too_large")]


def test_fields_a_child_reports_for_files_inside_are_cleaned_like_any_file(
        pool: IsolatedExtractor) -> None:
    files = [text_file("../../etc/\u202epasswd\x00.txt", "inside",
                       "text/plain; charset=<script>")]
    result = extract_all([probe("embed", files=files, encoding="<b>utf-8</b>")], pool, LIMITS)
    parent = next(e for e in result.extracted if e.parent is None)
    child = next(e for e in result.extracted if e.parent is not None)
    assert parent.encoding is None  # not a plausible encoding name
    assert "/" not in child.label.removeprefix("embed.json/")
    assert "\u202e" not in child.label and "\x00" not in child.label
    assert child.media_type is None  # junk parameters: dropped, not passed on
    assert isinstance(child, Extracted) and child.text == "inside"
    assert not isinstance(child, Omission)


# ------------------------------------------------------------------------ structure


def structure_reply(elements: object, text: bytes = b"Title\n\nBody text.",
                    **meta: object) -> Attachment:
    body = json.dumps({"ok": True, "elements": elements, **meta}).encode()
    return probe("raw", frame=reply_frame(body, text, b"").hex())


def test_structure_a_child_sends_honestly_reaches_the_document(pool: IsolatedExtractor) -> None:
    doc = extract_attachment(structure_reply([["Title", 0, 5, 3, None, ["eng"]],
                                              ["NarrativeText", 7, 17, 3, 0, []]]),
                             pool, LIMITS)

    assert [(e.category, doc.element_text(e), e.page, e.parent) for e in doc.elements] == [
        ("Title", "Title", 3, None), ("NarrativeText", "Body text.", 3, 0)]
    assert [(p.number, p.start, p.end) for p in doc.pages] == [(3, 0, 17)]


@pytest.mark.parametrize("elements", [
    "a string", {"an": "object"}, [["Title", 0, 5000, None, None, []]],
    [["Title", 0, 5, None, None, []], ["Title", 3, 9, None, None, []]],
    [["Title", 0, 5, None, 0, []]], [["</attachment>", 0, 5, None, None, []]],
    [["Title", 0, 5, None, None, ["x" * 100]]], [["Title", 0.5, 5, None, None, []]],
    [["Title", 0, 5, 10**12, None, []]],
])
def test_structure_no_honest_child_sends_is_set_aside_and_the_text_kept(
        pool: IsolatedExtractor, elements: object) -> None:
    doc = extract_attachment(structure_reply(elements), pool, LIMITS)

    assert doc.text == "Title\n\nBody text."
    assert [(e.category, doc.element_text(e)) for e in doc.elements] == [
        ("NarrativeText", "Title"), ("NarrativeText", "Body text.")]
    assert any("paragraphs stand in" in note for note in doc.notes)
    still_serves(pool)


def test_more_elements_than_the_limit_allows_are_set_aside(pool: IsolatedExtractor) -> None:
    limits = LIMITS.model_copy(update={"max_elements": 3})
    many = [["Text", i, i + 1, None, None, []] for i in range(0, 8, 2)]

    doc = extract_attachment(structure_reply(many, text=b"a b c d"), pool, limits)

    assert doc.text == "a b c d"
    assert any("over the limit of 3 (max_elements)" in note for note in doc.notes)


def test_meta_larger_than_the_element_allowance_is_refused_from_the_header(
        pool: IsolatedExtractor) -> None:
    limits = LIMITS.model_copy(update={"max_elements": 10})
    header = struct.pack(">8sIQQ", b"capsa-r1", (1 << 20) + 192 * 10 + 1, 4, 0)

    with pytest.raises(ExtractionFailed) as failed:
        extract_attachment(probe("raw", frame=header.hex()), pool, limits)

    assert failed.value.cause == "protocol"
    assert "reply meta of" in failed.value.detail
    still_serves(pool)


def test_mail_headers_a_child_sends_are_cleaned_and_capped(pool: IsolatedExtractor) -> None:
    doc = extract_attachment(structure_reply(None, mail={
        "sent_from": ["ops@example.org\u202e", 5, ["nested"]], "sent_to": "everyone",
        "subject": "s" * 10_000, "date": {"not": "a date"}}), pool, LIMITS)

    assert doc.mail is not None
    assert doc.mail.sent_from == ("ops@example.org",)
    assert doc.mail.sent_to == ()
    assert doc.mail.subject == "s" * 1000
    assert doc.mail.date is None
