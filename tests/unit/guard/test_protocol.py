"""`capsa.guard.sandbox.protocol`, and the framing and helpers of `child` and `zygote`.

The sandbox's behaviour under hostile parsers is exercised through the pool in
`test_isolation.py` and `tests/hostile/`; this file pins the frame formats, the
bounded reply reader, the control channel's descriptor passing, how a child
applies the call's limits and reports an error, in process, and how a worker
removes a crafted scratch tree.
"""

from __future__ import annotations

import io
import json
import os
import resource
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from capsa.errors import IngestionRejected
from capsa.guard import ExtractionLimits
from capsa.guard.limits import DEFAULT_LIMITS
from capsa.guard.port import EmbeddedFile, Parsed
from capsa.guard.sandbox import protocol
from capsa.guard.sandbox.child import _describe, _parse
from capsa.guard.sandbox.protocol import (
    CONTROL_MESSAGE_BYTES,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    ProtocolError,
    ReplyReader,
    decode_meta,
    encode_reply,
    encode_request,
    read_request,
    receive_control,
    send_control,
)
from capsa.guard.sandbox.zygote import read_frame, remove_tree, write_frame

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the sandbox is Linux's")


def header(meta: int, text: int, blob: int, magic: bytes = protocol._MAGIC) -> bytes:
    """A reply header declaring these sizes, as a (possibly lying) child would write it."""
    return protocol._HEADER.pack(magic, meta, text, blob)


def reader_for(frame: bytes, *, max_text_bytes: int = 1 << 20,
               max_blob_bytes: int = 1 << 20) -> ReplyReader:
    reader = ReplyReader(max_text_bytes=max_text_bytes, max_blob_bytes=max_blob_bytes)
    reader.feed(frame)
    return reader


def writing(fd: int, data: bytes) -> threading.Thread:
    """Write `data` to `fd` from a thread (more than a pipe holds), then close it."""
    def write() -> None:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


# ------------------------------------------------------------- the zygote's start frame


def test_write_frame_prefixes_the_body_with_its_big_endian_length() -> None:
    stream = io.BytesIO()

    write_frame(stream, b"hello")

    assert stream.getvalue() == b"\x00\x00\x00\x05hello"


def test_read_frame_returns_frames_in_the_order_written() -> None:
    stream = io.BytesIO()
    for body in (b"one", b"", b"three" * 1000):
        write_frame(stream, body)
    stream.seek(0)

    assert [read_frame(stream) for _ in range(4)] == [b"one", b"", b"three" * 1000, None]


@pytest.mark.parametrize("wire", [b"", b"\x00\x00", b"\x00\x00\x00\x09short"])
def test_read_frame_returns_none_for_a_truncated_stream(wire: bytes) -> None:
    assert read_frame(io.BytesIO(wire)) is None


# --------------------------------------------------------------------------- the reply


def test_reply_round_trips_meta_text_and_blobs() -> None:
    meta = {"ok": True, "notes": ["n"], "embedded": [{"name": "a", "size": 2}]}

    reader = reader_for(encode_reply(meta, "héllo 𝄞", [b"ab", b"", b"cde"]))

    assert reader.complete
    assert (decode_meta(reader.meta()), reader.text(), bytes(reader.blobs())) == (
        meta, "héllo 𝄞", b"abcde")


def test_reply_text_with_four_byte_characters_costs_four_bytes_each() -> None:
    empty = encode_reply({"ok": True}, "", [])

    frame = encode_reply({"ok": True}, "𝄞" * 10, [])

    assert len(frame) - len(empty) == 40  # raw UTF-8, not 12 bytes of JSON escapes each
    assert reader_for(frame, max_text_bytes=40).text() == "𝄞" * 10
    with pytest.raises(ProtocolError, match="reply text of 40 bytes"):
        reader_for(frame, max_text_bytes=39)


def test_reply_reader_gives_the_same_result_whatever_the_piece_size() -> None:
    frame = encode_reply({"ok": True, "encoding": "cp1252"}, "text ✓ 𝄞", [b"\x00\xff", b"z"])
    results = set()

    for size in range(1, len(frame) + 1):
        reader = ReplyReader(max_text_bytes=64, max_blob_bytes=8)
        for start in range(0, len(frame), size):
            reader.feed(frame[start:start + size])
        assert (reader.complete, reader.received) == (True, len(frame))
        results.add((reader.meta(), reader.text(), bytes(reader.blobs())))

    assert results == {(b'{"ok": true, "encoding": "cp1252"}', "text ✓ 𝄞", b"\x00\xffz")}


def test_reply_reader_replaces_invalid_utf8_in_the_text() -> None:
    frame = header(2, 3, 0) + b"{}" + b"a\xffb"

    assert reader_for(frame).text() == "a\ufffdb"


def test_reply_reader_is_incomplete_until_the_declared_body_arrives() -> None:
    frame = encode_reply({"ok": True}, "abc", [])
    reader = reader_for(frame[:-1])

    assert (reader.complete, reader.received) == (False, len(frame) - 1)


def test_reply_reader_accepts_sizes_exactly_at_its_bounds() -> None:
    reader = reader_for(header(MAX_META_BYTES, 10, 20), max_text_bytes=10, max_blob_bytes=20)

    assert not reader.complete
    assert len(reader.buffer()) == MAX_META_BYTES + 30


@pytest.mark.parametrize(
    ("declared", "words"),
    [
        (header(MAX_META_BYTES + 1, 0, 0), "reply meta"),
        (header(2**32 - 1, 0, 0), "reply meta"),
        (header(2, 11, 0), "reply text of 11 bytes"),
        (header(2, 2**62, 0), "reply text"),
        (header(2, 0, 21), "embedded files of 21 bytes"),
        (header(2, 0, 2**63), "embedded files"),
        (header(2, 0, 0, magic=b"capsa-r0"), "does not start with the protocol's header"),
    ],
    ids=["meta", "meta-4GiB", "text", "text-huge", "blobs", "blobs-huge", "magic"],
)
def test_reply_reader_refuses_a_header_before_allocating_its_body(
    declared: bytes, words: str,
) -> None:
    reader = ReplyReader(max_text_bytes=10, max_blob_bytes=20)

    with pytest.raises(ProtocolError, match=words):
        reader.feed(declared)  # the header alone: nothing of the body was ever needed

    assert reader._body is None


def test_reply_reader_refuses_data_after_the_end_of_the_reply() -> None:
    frame = encode_reply({"ok": True}, "abc", [b"x"])

    with pytest.raises(ProtocolError, match="data after the end"):
        reader_for(frame + b"!")


def test_reply_reader_refuses_data_fed_after_a_complete_reply() -> None:
    reader = reader_for(encode_reply({"ok": True}, "", []))

    with pytest.raises(ProtocolError, match="data after the end"):
        reader.feed(b"!")


def test_reply_reader_reads_a_reply_larger_than_a_pipe_from_a_real_pipe() -> None:
    blob = bytes(range(256)) * 2048  # 512 KiB, several times a pipe's buffer
    frame = encode_reply({"ok": True}, "text", [blob])
    read_fd, write_fd = os.pipe()
    writer = writing(write_fd, frame)
    reader = ReplyReader(max_text_bytes=16, max_blob_bytes=len(blob))

    try:
        while reader.read_from(read_fd):
            pass
    finally:
        writer.join()
        os.close(read_fd)

    assert (reader.complete, reader.text(), bytes(reader.blobs()) == blob) == (True, "text", True)


def test_reply_reader_reports_end_of_file_on_a_pipe_cut_short() -> None:
    frame = encode_reply({"ok": True}, "a long text", [])
    read_fd, write_fd = os.pipe()
    os.write(write_fd, frame[:30])
    os.close(write_fd)
    reader = ReplyReader(max_text_bytes=64, max_blob_bytes=0)

    while reader.read_from(read_fd):
        pass
    os.close(read_fd)

    assert (reader.complete, reader.received) == (False, 30)


def test_reply_reader_refuses_data_after_the_end_on_a_pipe() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, encode_reply({"ok": True}, "abc", []) + b"trailing")
    os.close(write_fd)
    reader = ReplyReader(max_text_bytes=64, max_blob_bytes=0)

    try:
        while not reader.complete:
            assert reader.read_from(read_fd)
        with pytest.raises(ProtocolError, match="data after the end"):
            reader.read_from(read_fd)
    finally:
        os.close(read_fd)


# ------------------------------------------------------------------------- the meta


def test_decode_meta_returns_a_json_object() -> None:
    assert decode_meta(b'{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}


def test_decode_meta_accepts_exactly_max_meta_depth() -> None:
    assert MAX_META_DEPTH == 4
    assert decode_meta(b'{"a": [{"b": [1]}]}') == {"a": [{"b": [1]}]}


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": [{"b": [[1]]}]}',
        b"[" * 900 + b"]" * 900,
        b'{"a":' + b'[{"a":' * 450 + b"1" + b"}]" * 450 + b"}",
        b"{" * 900,
    ],
    ids=["five", "900-lists", "900-mixed", "900-unclosed"],
)
def test_decode_meta_refuses_nesting_deeper_than_max_meta_depth(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="nested deeper than 4 levels"):
        decode_meta(data)


def test_decode_meta_does_not_count_brackets_inside_strings() -> None:
    inside = "[" * 900 + '{}]]"\\[[{'

    assert decode_meta(json.dumps({"a": inside}).encode()) == {"a": inside}


@pytest.mark.parametrize("data", [b"[1]", b'"text"', b"1", b"null"])
def test_decode_meta_refuses_a_value_that_is_not_an_object(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="not a JSON object"):
        decode_meta(data)


@pytest.mark.parametrize("data", [b"", b'{"a": }', b"{'a': 1}", b'{"a": 1} {}', b"\xff"])
def test_decode_meta_refuses_invalid_json(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="not valid JSON"):
        decode_meta(data)


def _frames_on_stack() -> int:
    frame = sys._getframe()
    count = 0
    while frame is not None:
        count += 1
        frame = frame.f_back  # type: ignore[assignment]
    return count


def near_the_recursion_limit(leave: int, call: Callable[[], Any]) -> Any:
    """Run `call` from a recursion that leaves about `leave` frames before the limit."""
    def dive(depth: int) -> Any:
        if sys.getrecursionlimit() - _frames_on_stack() > leave:
            return dive(depth + 1)
        return call()

    return dive(0)


def test_near_the_recursion_limit_really_leaves_little_room() -> None:
    def recurse(n: int) -> int:
        return 0 if n == 0 else recurse(n - 1) + 1

    with pytest.raises(RecursionError):
        near_the_recursion_limit(20, lambda: recurse(40))


@pytest.mark.parametrize(
    "data", [b"[" * 900 + b"]" * 900, b"{" * 100_000, b'{"a": [{"b": [1]}]}', b"[[", b"{]"],
)
def test_decode_meta_never_lets_recursion_error_out_near_the_recursion_limit(
    data: bytes,
) -> None:
    def decode() -> object:
        try:
            return decode_meta(data)
        except ProtocolError as exc:
            return exc

    outcome = near_the_recursion_limit(20, decode)

    assert isinstance(outcome, ProtocolError | dict)


# ---------------------------------------------------------------------- the control


@pytest.fixture
def control_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        yield ours, theirs


def test_control_message_arrives_whole_without_descriptors(
    control_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = control_pair

    send_control(ours, {"file": {"timeout_s": 2.5}})

    assert receive_control(theirs) == ({"file": {"timeout_s": 2.5}}, [])


def test_control_descriptors_arrive_and_work(
    control_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = control_pair
    read_fd, write_fd = os.pipe()

    send_control(ours, {"file": {}}, [read_fd, write_fd])
    os.close(read_fd)
    os.close(write_fd)
    message, fds = receive_control(theirs)
    os.write(fds[1], b"through the passed pipe")
    received = os.read(fds[0], 100)
    for fd in fds:
        os.close(fd)

    assert (message, len(fds), received) == ({"file": {}}, 2, b"through the passed pipe")


def test_receive_control_returns_none_at_end_of_stream() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.close()
    with theirs:
        assert receive_control(theirs) == (None, [])


@pytest.mark.parametrize("data", [b"[1, 2]", b"not json", b"[" * 900])
def test_receive_control_closes_the_descriptors_of_a_message_that_is_not_an_object(
    control_pair: tuple[socket.socket, socket.socket], data: bytes,
) -> None:
    ours, theirs = control_pair
    read_fd, write_fd = os.pipe()
    socket.send_fds(ours, [data], [read_fd])
    os.close(read_fd)  # the copy in flight is now the pipe's only reader

    with pytest.raises(ProtocolError):
        receive_control(theirs)

    try:
        with pytest.raises(BrokenPipeError):  # no reader left: the received copy was closed
            os.write(write_fd, b"x")
    finally:
        os.close(write_fd)


def test_receive_control_never_hands_over_more_than_two_descriptors(
    control_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = control_pair
    pipes = [os.pipe() for _ in range(3)]
    send_control(ours, {"file": {}}, [r for r, _ in pipes])
    for r, _ in pipes:
        os.close(r)

    message, fds = receive_control(theirs)

    try:
        assert (message, len(fds)) == ({"file": {}}, 2)
        with pytest.raises(BrokenPipeError):  # the third was not leaked into this process
            os.write(pipes[2][1], b"x")
    finally:
        for fd in fds + [w for _, w in pipes]:
            os.close(fd)


def test_send_control_refuses_a_message_over_the_control_size(
    control_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _ = control_pair

    with pytest.raises(ProtocolError, match="control message"):
        send_control(ours, {"x": "y" * CONTROL_MESSAGE_BYTES})


# ---------------------------------------------------------------------- the request


def test_request_round_trips_through_a_pipe() -> None:
    request = {"kind": "pdf", "media_type": None, "payload": b"%PDF" + bytes(300_000),
               "limits": ExtractionLimits().model_dump_json()}
    read_fd, write_fd = os.pipe()
    writer = writing(write_fd, encode_request(request))

    try:
        received = read_request(read_fd)
        after = read_request(read_fd)
    finally:
        writer.join()
        os.close(read_fd)

    assert (received, after) == (request, None)


def test_read_request_returns_none_for_a_request_cut_short() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, encode_request({"kind": "text", "payload": b"x" * 100})[:-1])
    os.close(write_fd)

    try:
        assert read_request(read_fd) is None
    finally:
        os.close(read_fd)


# ------------------------------------------------------------- the child, in process


class Configurable:
    """A trusted extractor that reports the limits it was configured with and the pages asked."""

    kinds = frozenset({"text"})

    def __init__(self, limits: ExtractionLimits | None = None) -> None:
        self.limits = limits

    def with_limits(self, limits: ExtractionLimits) -> Configurable:
        return Configurable(limits)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *, max_pages: int) -> str:
        pixels = self.limits.max_pixels if self.limits is not None else None
        return f"max_pixels={pixels} max_pages={max_pages}"


class Answering:
    """A trusted extractor that returns (or raises) whatever it was built with."""

    kinds = frozenset({"text"})

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def extract(self, kind: str, media_type: str | None, payload: bytes,
                *, max_pages: int) -> object:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def request(limits: ExtractionLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    return {"kind": "text", "media_type": None, "payload": b"x",
            "limits": limits.model_dump_json()}


def reply(frame: bytes) -> tuple[dict[str, Any], str, bytes]:
    """What the application reads from a child's reply frame."""
    reader = reader_for(frame)
    assert reader.complete
    return decode_meta(reader.meta()), reader.text(), bytes(reader.blobs())


def test_parse_configures_the_extractor_with_the_limits_of_the_call() -> None:
    frame = _parse(Configurable(), request(ExtractionLimits(max_pixels=123, max_pages=4)))

    assert reply(frame) == ({"ok": True}, "max_pixels=123 max_pages=4", b"")


def test_parse_applies_the_text_ceiling_of_the_call() -> None:
    meta, text, _ = reply(_parse(Configurable(), request(ExtractionLimits(max_text_chars=5))))

    assert (meta["rejected"]["reason"], meta["rejected"]["stage"], text) == (
        "text_too_long", "text", "")
    assert "over the limit of 5" in meta["rejected"]["detail"]


def test_parse_sends_embedded_files_as_raw_bytes_with_their_sizes() -> None:
    parsed = Parsed("body", encoding="cp1252", encoding_confidence=0.5, notes=("n",),
                    embedded=(EmbeddedFile(name="a.txt", media_type="text/plain", payload=b"hi"),
                              EmbeddedFile(name="b", media_type=None, payload=b"\x00\xff")))

    meta, text, blobs = reply(_parse(Answering(parsed), request()))

    assert (text, blobs) == ("body", b"hi\x00\xff")
    assert meta == {"ok": True, "encoding": "cp1252", "confidence": 0.5, "notes": ["n"],
                    "embedded": [{"name": "a.txt", "media_type": "text/plain", "size": 2},
                                 {"name": "b", "media_type": None, "size": 2}]}


def test_parse_reports_an_extractor_that_returns_no_text_as_protocol() -> None:
    meta, _, _ = reply(_parse(Answering(42), request()))

    assert meta == {"failed": {"cause": "protocol",
                               "detail": "extractor returned int, not str"}}


def test_parse_passes_on_an_extractors_refusal() -> None:
    refusal = IngestionRejected("DOCTYPE", label="x", stage="preflight", reason="forbidden_xml")

    meta, _, _ = reply(_parse(Answering(refusal), request()))

    assert meta == {"rejected": {"reason": "forbidden_xml", "stage": "preflight",
                                 "detail": "DOCTYPE"}}


def test_parse_caps_an_error_detail_so_the_reply_stays_small() -> None:
    refusal = IngestionRejected("x" * 1_000_000, label="x", stage="parser", reason="corrupt")

    meta, _, _ = reply(_parse(Answering(refusal), request()))

    assert len(meta["rejected"]["detail"]) == 2000


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot describe itself")


def test_describe_names_an_exception_whose_str_raises_by_its_type() -> None:
    assert _describe(_Unprintable()) == "_Unprintable"


def test_describe_gives_type_and_message() -> None:
    assert _describe(KeyError("part")) == "KeyError: 'part'"


# ----------------------------------------------------------------- removing a scratch


def make_deep_tree(top: Path, depth: int) -> None:
    """`depth` nested directories under `top`, a file at the bottom (past PATH_MAX)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


def test_remove_tree_removes_a_tree_3000_directories_deep(tmp_path: Path) -> None:
    top = tmp_path / "scratch"
    top.mkdir()
    make_deep_tree(top, 3000)  # shutil.rmtree recurses once per level: RecursionError

    remove_tree(str(top))

    assert not top.exists()


def test_remove_tree_removes_a_tree_deeper_than_its_free_descriptors(tmp_path: Path) -> None:
    # It holds two descriptors at most, whatever the depth; the old walk held one a level
    # and, on EMFILE, re-entered the same directory forever.
    top = tmp_path / "scratch"
    top.mkdir()
    make_deep_tree(top, 400)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: few descriptors, two seconds of CPU
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
            resource.setrlimit(resource.RLIMIT_CPU, (2, 3))
            remove_tree(str(top))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    removed = not top.exists()
    remove_tree(str(top))  # clean up either way

    assert os.waitstatus_to_exitcode(status) == 0  # not killed by SIGXCPU in a loop
    assert removed


def test_remove_tree_removes_a_symlinked_directory_as_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    top = tmp_path / "scratch"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "link").symlink_to(outside, target_is_directory=True)
    (top / "file-link").symlink_to(outside / "keep.txt")

    remove_tree(str(top))

    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "kept"


def test_remove_tree_does_not_follow_a_symlink_given_as_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(outside, target_is_directory=True)

    remove_tree(str(link))

    assert (outside / "keep.txt").read_text() == "kept"


def test_remove_tree_never_raises_on_a_missing_path(tmp_path: Path) -> None:
    remove_tree(str(tmp_path / "never-created"))

    assert list(tmp_path.iterdir()) == []


def test_a_reply_reader_says_how_many_bytes_it_still_wants() -> None:
    frame = encode_reply({"ok": True}, "hello", [b"blob"])
    reader = ReplyReader(max_text_bytes=100, max_blob_bytes=100)
    assert reader.wanted == protocol._HEADER.size  # the header first, then the body

    for start in range(0, len(frame), 7):
        assert reader.wanted == len(reader.buffer())  # without building the buffer
        reader.feed(frame[start:start + 7])

    assert reader.complete and reader.wanted == 0
