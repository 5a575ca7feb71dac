"""What crosses the trust boundary, and how each side reads it in bounded, linear time.

Three channels, and who may read each:

- **control** (application <-> zygote): a ``SOCK_SEQPACKET`` socket of small
  JSON messages. Per file the application sends the file's limits (numbers
  only) with two pipe descriptors attached; the zygote passes the descriptors
  to the file's child unread and answers with how the child ended. No byte of
  a payload or a result ever travels here, so the zygote, whose memory every
  later child inherits, never holds tenant data.
- **request** (application -> child): one frame, a pickle of the file's kind,
  media type, payload and limits. The application is the trusted side, so the
  child may unpickle what it sends.
- **reply** (child -> application): one frame the child writes and the
  application distrusts: a fixed header, a small JSON *meta* object, the text
  as raw UTF-8 and the embedded files' bytes. `ReplyReader` checks every
  declared size against the file's bounds *before* it allocates, reads into one
  preallocated buffer (no quadratic ``buffer += chunk``), and `decode_meta`
  refuses nesting deeper than `MAX_META_DEPTH` before `json` sees it, so a
  reply's shape can never reach the application's recursion limit.

Examples:
    >>> frame = encode_reply({"ok": True}, "héllo", [])
    >>> reader = ReplyReader(max_text_bytes=64, max_blob_bytes=0)
    >>> reader.feed(frame)
    >>> reader.complete, decode_meta(reader.meta()), reader.text()
    (True, {'ok': True}, 'héllo')
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import socket
import struct
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CONTROL_MESSAGE_BYTES",
    "MAX_META_BYTES",
    "MAX_META_DEPTH",
    "STRUCTURE_BYTES_PER_ELEMENT",
    "EmbeddedTooLarge",
    "ProtocolError",
    "ReplyReader",
    "decode_meta",
    "encode_reply",
    "encode_request",
    "meta_limit",
    "read_request",
    "receive_control",
    "reply_frame",
    "send_control",
]

_MAGIC = b"capsa-r1"
_HEADER = struct.Struct(">8sIQQ")  # magic, meta bytes, text bytes, blob bytes
_REQUEST_LENGTH = struct.Struct(">Q")
MAX_META_BYTES = 1 << 20
"""The meta object's ceiling: notes, an encoding and up to ``max_members`` embedded names."""
MAX_META_DEPTH = 4
"""``{"embedded": [{"name": ...}]}`` is three deep, ``{"elements": [[..., ["eng"]]]}`` four;
nothing the child sends needs more."""
STRUCTURE_BYTES_PER_ELEMENT = 192
"""What one element may add to the meta: ``["NarrativeText", 123456789, 123456799,
4999, 199998, ["eng", ...]]`` with eight language codes fits with room to spare."""
CONTROL_MESSAGE_BYTES = 1 << 16
"""The largest control message either side accepts (a start report, a file's end)."""
_MAX_FDS = 2
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)  # an unclosed string runs to the end
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_PAIR = re.compile(rb"\[\]|\{\}")


def meta_limit(max_elements: int) -> int:
    """The meta ceiling for a file whose structure may have `max_elements` elements.

    Examples:
        >>> meta_limit(0) == MAX_META_BYTES
        True
    """
    return MAX_META_BYTES + STRUCTURE_BYTES_PER_ELEMENT * max_elements


class ProtocolError(Exception):
    """A reply or control message that breaks the protocol; the detail says how."""


class EmbeddedTooLarge(ProtocolError):
    """Files found inside the file weigh more than its allowance: a refusal, not a fault.

    An honest child cannot know how much of the allowance is left, so this
    one size is the file's limit speaking, not the child breaking the protocol.
    """


# ------------------------------------------------------------------------- control


def send_control(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one JSON control message, with descriptors attached when given."""
    data = json.dumps(message).encode()
    if len(data) > CONTROL_MESSAGE_BYTES:
        raise ProtocolError(f"control message of {len(data)} bytes, over "
                            f"{CONTROL_MESSAGE_BYTES}")
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def receive_control(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One control message and any descriptors with it; ``(None, [])`` at end of stream.

    Descriptors beyond `_MAX_FDS`, or sent with a message that is not an
    object, are closed here, never leaked to the caller.
    """
    data, fds, _, _ = socket.recv_fds(sock, CONTROL_MESSAGE_BYTES, _MAX_FDS)
    if not data:
        _close_all(fds)
        return None, []
    try:
        message = decode_meta(data)
    except ProtocolError:
        _close_all(fds)
        raise
    return message, list(fds)


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


# ------------------------------------------------------------------------- request


def encode_request(request: dict[str, Any]) -> bytes:
    """The request frame the application writes to a file's child."""
    body = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    return _REQUEST_LENGTH.pack(len(body)) + body


def read_request(fd: int) -> dict[str, Any] | None:
    """The child's side: one request frame from `fd`, or None at end of file."""
    head = _read_exactly(fd, _REQUEST_LENGTH.size)
    if head is None:
        return None
    (size,) = _REQUEST_LENGTH.unpack(head)
    body = _read_exactly(fd, size)
    if body is None:
        return None
    request: dict[str, Any] = pickle.loads(body)  # the trusted side wrote it
    return request


def _read_exactly(fd: int, size: int) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    done = 0
    while done < size:
        count = os.readv(fd, [view[done:]])
        if count == 0:
            return None
        done += count
    return bytes(buffer)


# --------------------------------------------------------------------------- reply


def encode_reply(meta: dict[str, Any], text: str, blobs: Sequence[bytes]) -> bytes:
    """The child's reply: header, JSON meta, UTF-8 text, then the embedded files' bytes."""
    return reply_frame(json.dumps(meta, ensure_ascii=False).encode("utf-8", "replace"),
                       text.encode("utf-8", "replace"), b"".join(blobs))


def reply_frame(meta: bytes, text: bytes, blob: bytes) -> bytes:
    """A reply frame around raw sections, as any child (or a test playing one) may write."""
    return b"".join((_HEADER.pack(_MAGIC, len(meta), len(text), len(blob)), meta, text, blob))


class ReplyReader:
    """Reads one reply frame from an untrusted child, in linear time and bounded memory.

    Sizes are checked when the header arrives, before anything is allocated:
    a child that declares more than its file may produce is refused without
    reading on. The body lands in one buffer of exactly the declared size.

    Args:
        max_text_bytes: the most UTF-8 bytes the text may take (4 per character allowed).
        max_blob_bytes: the most bytes all embedded files together may take.
        max_meta_bytes: the most bytes the meta object may take (`meta_limit` of the
            file's ``max_elements``; `MAX_META_BYTES` for a reply without structure).
    """

    def __init__(self, *, max_text_bytes: int, max_blob_bytes: int,
                 max_meta_bytes: int = MAX_META_BYTES) -> None:
        self.max_text_bytes = max_text_bytes
        self.max_blob_bytes = max_blob_bytes
        self.max_meta_bytes = max_meta_bytes
        self._head = bytearray()
        self._body: bytearray | None = None
        self._filled = 0
        self._sizes = (0, 0, 0)

    @property
    def complete(self) -> bool:
        """Whether the whole declared frame has arrived."""
        return self._body is not None and self._filled == len(self._body)

    @property
    def received(self) -> int:
        """Bytes taken so far, header included."""
        return len(self._head) + self._filled

    @property
    def wanted(self) -> int:
        """Bytes still to come before the frame (or its header, while unread) is complete."""
        if self._body is None:
            return _HEADER.size - len(self._head)
        return len(self._body) - self._filled

    def buffer(self) -> memoryview:
        """Where the next bytes go: the header's remainder, then the body's."""
        if self._body is None:
            return memoryview(bytearray(_HEADER.size - len(self._head)))
        return memoryview(self._body)[self._filled:]

    def read_from(self, fd: int) -> int:
        """Read what `fd` has into place; returns the count (0 at end of file).

        Raises:
            ProtocolError: the header declares more than the bounds allow, or
                data arrives after the frame is complete.
        """
        if self.complete:
            if os.read(fd, 1):
                raise ProtocolError("data after the end of the reply")
            return 0
        if self._body is None:
            chunk = os.read(fd, _HEADER.size - len(self._head))
            self.feed(chunk)
            return len(chunk)
        count = os.readv(fd, [memoryview(self._body)[self._filled:]])
        self._filled += count
        return count

    def feed(self, data: bytes) -> None:
        """Take `data` (for tests and callers that already hold bytes)."""
        view = memoryview(data)
        while view:
            if self._body is None:
                take = min(len(view), _HEADER.size - len(self._head))
                self._head += view[:take]
                view = view[take:]
                if len(self._head) == _HEADER.size:
                    self._start_body()
                continue
            room = len(self._body) - self._filled
            if len(view) > room:
                raise ProtocolError("data after the end of the reply")
            self._body[self._filled:self._filled + len(view)] = view
            self._filled += len(view)
            view = view[len(view):]

    def _start_body(self) -> None:
        magic, meta, text, blob = _HEADER.unpack(bytes(self._head))
        if magic != _MAGIC:
            raise ProtocolError("the reply does not start with the protocol's header")
        if meta > self.max_meta_bytes:
            raise ProtocolError(f"reply meta of {meta} bytes, over {self.max_meta_bytes}")
        if text > self.max_text_bytes:
            raise ProtocolError(f"reply text of {text} bytes, over the {self.max_text_bytes} "
                                "its text limit allows")
        if blob > self.max_blob_bytes:
            raise EmbeddedTooLarge(f"embedded files of {blob} bytes, over the "
                                f"{self.max_blob_bytes} its size limit allows")
        self._sizes = (meta, text, blob)
        self._body = bytearray(meta + text + blob)

    def meta(self) -> bytes:
        """The meta object's bytes (call once `complete`)."""
        assert self._body is not None
        return bytes(self._body[:self._sizes[0]])

    def text(self) -> str:
        """The text, decoded; invalid UTF-8 becomes U+FFFD."""
        assert self._body is not None
        meta, text, _ = self._sizes
        return bytes(self._body[meta:meta + text]).decode("utf-8", "replace")

    def blobs(self) -> memoryview:
        """The embedded files' bytes, back to back."""
        assert self._body is not None
        meta, text, _ = self._sizes
        return memoryview(self._body)[meta + text:]


def decode_meta(data: bytes) -> dict[str, Any]:
    """A JSON object of at most `MAX_META_DEPTH` levels, or `ProtocolError`.

    The depth is measured by one linear scan before `json.loads` runs, so a
    reply nested a thousand deep is refused whatever the caller's own stack
    depth, and `RecursionError` cannot reach the application.

    Examples:
        >>> decode_meta(b'{"a": [1, {"b": 2}]}')
        {'a': [1, {'b': 2}]}
        >>> decode_meta(b'[' * 900 + b']' * 900)
        Traceback (most recent call last):
        ...
        capsa.guard.sandbox.protocol.ProtocolError: nested deeper than 4 levels
    """
    if _too_deep(data, MAX_META_DEPTH):
        raise ProtocolError(f"nested deeper than {MAX_META_DEPTH} levels")
    try:
        value = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise ProtocolError("not valid JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError("not a JSON object")
    return value


def _too_deep(data: bytes, limit: int) -> bool:
    """Whether brackets outside strings nest past `limit` (or do not balance).

    Strings are removed, then everything but brackets, then `limit` passes
    each remove the innermost ``[]`` and ``{}`` pairs: whatever is left was
    deeper. Every step is a regular-expression or translate pass in C, so a
    megabyte of brackets costs milliseconds, not a Python loop per byte.
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        brackets = _PAIR.sub(b"", brackets)
    return bool(brackets)
