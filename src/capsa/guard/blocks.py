"""Content blocks that carry files, in every shape the frameworks and providers use.

A chat message reaches capsa as a list of content blocks, and a file can
ride in any of a dozen shapes: LangChain's standard blocks (v1:
``{"type": "file", "base64": ...}``; v0: ``{"type": "file", "source_type":
"base64", "data": ...}``), OpenAI's (``{"type": "file", "file": {"file_data":
"data:...;base64,...", "filename": ...}}``, ``input_file``, ``image_url``,
``input_image``, ``input_audio``), Anthropic's (``{"type": "document",
"source": {"type": "base64" | "text" | "url" | "file", ...}}``, ``image``),
and LlamaIndex's ``DocumentBlock``/``ImageBlock``/``AudioBlock``/
``VideoBlock`` (which its adapter hands over in the v1 form). `decode_block`
recognises each and turns it into an `Attachment` for the guard, or into an
`Omission` with the true reason it cannot be read:

- ``not_fetched``: the file is given by reference (a URL, a path) and the
  caller supplied no fetcher; capsa never fetches on its own;
- ``fetch_failed``: the caller's fetcher raised;
- ``provider_file``: the file lives on a provider's server (a file id);
- ``corrupt``: the inline data does not decode;
- ``unsupported_type``: a block of a type capsa does not know, or a video.

A block that carries no file (text, reasoning) is not a file: `decode_block`
returns None and the adapter leaves it in place. Everything else is taken
out of the message: no block capsa does not understand reaches the model.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict

from capsa.guard.extract import Attachment, Omission
from capsa.guard.labels import safe_label

__all__ = [
    "TEXT_BLOCK_TYPES",
    "DecodedBlock",
    "Fetcher",
    "block_filename",
    "carries_file",
    "decode_block",
]

Fetcher = Callable[[str], bytes]
"""Fetches the bytes a URL or path names, for blocks given by reference.

The caller owns it: which hosts it may reach, how many bytes it reads (the
guard refuses more than ``limits.max_bytes`` after the fact), its timeout."""

TEXT_BLOCK_TYPES = frozenset({"text", "input_text"})
"""Block types that are the user's own words, left in the message as they are."""

_PASSIVE_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking", "refusal"})
"""Block types that carry no file and no input for the model to read as evidence."""

Media = Literal["file", "image", "audio", "video"]
_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<data>.*)", re.DOTALL)


class DecodedBlock(BaseModel):
    """A file-carrying block, recognised: what it is, and its bytes or why there are none."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    media: Media
    """What the block says it carries: a file (document), an image, audio or video."""
    label: str
    """The safe label (its file name, or ``attachment-N``)."""
    outcome: Attachment | Omission
    """The decoded file, for the guard; or the refusal, with its true reason."""


def block_filename(block: Mapping[str, Any]) -> str:
    """The file name a content block gives, wherever its provider puts it; ``""`` if none.

    Examples:
        >>> block_filename({"type": "file", "extras": {"filename": "q3.pdf"}})
        'q3.pdf'
        >>> block_filename({"type": "file", "file": {"filename": "a.pdf", "file_data": "..."}})
        'a.pdf'
    """
    nested = _mapping(block, "file")
    extras = _mapping(block, "extras")
    metadata = _mapping(block, "metadata")
    for candidate in (block.get("filename"), nested.get("filename"), extras.get("filename"),
                      metadata.get("filename"), block.get("name"), block.get("title")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return ""


def carries_file(block: object) -> bool:
    """Whether a content block is anything but the user's words: `decode_block` reads it.

    Cheap (the block's type only), for adapters sorting a message's blocks.

    Examples:
        >>> carries_file("hi"), carries_file({"type": "text", "text": "hi"})
        (False, False)
        >>> carries_file({"type": "document", "source": {}}), carries_file({"type": "x"})
        (True, True)
    """
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind == "non_standard" and isinstance(block.get("value"), Mapping):
        return carries_file(block["value"])
    return kind not in TEXT_BLOCK_TYPES and kind not in _PASSIVE_TYPES


def decode_block(block: str | Mapping[str, Any], position: int = 0, *,
                 fetch: Fetcher | None = None) -> DecodedBlock | None:
    """Recognise a content block's shape and decode its file; None when it carries none.

    Args:
        block: one content block, as a framework's message holds it.
        position: its position among the message's blocks (names an unnamed file).
        fetch: fetches a file given by URL or path; None to refuse such files.

    Examples:
        >>> decode_block({"type": "text", "text": "hi"}) is None
        True
        >>> decode_block({"type": "file", "file": {"file_data": "data:text/plain;base64,aGk=",
        ...                                        "filename": "a.txt"}}).outcome.payload
        b'hi'
        >>> decode_block({"type": "document", "source": {"type": "url",
        ...                                              "url": "https://x/y.pdf"}}).outcome.reason
        'not_fetched'
    """
    if not isinstance(block, Mapping) or not carries_file(block):
        return None
    kind = block.get("type")
    if kind == "non_standard" and isinstance(block.get("value"), Mapping):
        return decode_block(block["value"], position, fetch=fetch)
    media = _media(block)
    name = block_filename(block)
    where = _reference(block)
    if not name and where is not None and where[0] in ("url", "path"):
        name = _name_from(where[1])
    label = safe_label(name, index=position)
    if media is None:
        return DecodedBlock(media="file", label=label, outcome=_refuse(
            label, "sniff", "unsupported_type",
            f"a content block of type {str(kind)[:40]!r}, which capsa does not read"))
    if media == "video":
        return DecodedBlock(media=media, label=label, outcome=_refuse(
            label, "sniff", "unsupported_type", "capsa does not read video"))
    inline = _inline(block)
    if inline is not None:
        data, declared, encoded = inline
        return DecodedBlock(media=media, label=label,
                            outcome=_decoded(data, declared, encoded, label))
    if where is None:
        return DecodedBlock(media=media, label=label, outcome=_refuse(
            label, "size", "empty", "the block carries no data"))
    how, ref = where
    if how == "file_id":
        return DecodedBlock(media=media, label=label, outcome=_refuse(
            label, "sniff", "provider_file",
            "the file is a provider's file id; its bytes are on the provider's server, "
            "where capsa cannot guard them"))
    if fetch is None:
        return DecodedBlock(media=media, label=label, outcome=_refuse(
            label, "sniff", "not_fetched",
            f"the file is given by {'a URL' if how == 'url' else 'a path'} and no fetcher "
            "was supplied; capsa never fetches on its own"))
    try:
        payload = fetch(ref)
    except Exception as error:  # noqa: BLE001 - the caller's fetcher: any failure is this file's outcome
        return DecodedBlock(media=media, label=label, outcome=_refuse(
            label, "size", "fetch_failed", f"the fetcher raised {type(error).__name__}"))
    if not isinstance(payload, bytes):
        return DecodedBlock(media=media, label=label, outcome=_refuse(
            label, "size", "fetch_failed", "the fetcher returned no bytes"))
    return DecodedBlock(media=media, label=label, outcome=Attachment(
        label=label, media_type=_declared(block), payload=payload))


def _mapping(block: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = block.get(key)
    return value if isinstance(value, Mapping) else {}


def _media(block: Mapping[str, Any]) -> Media | None:
    kind = block.get("type")
    if kind in ("file", "input_file", "document", "text-plain"):
        return "file"
    if kind in ("image", "image_url", "input_image"):
        return "image"
    if kind in ("audio", "input_audio"):
        return "audio"
    if kind == "video":
        return "video"
    return None


def _declared(block: Mapping[str, Any]) -> str | None:
    source = _mapping(block, "source")
    for candidate in (block.get("mime_type"), block.get("media_type"), source.get("media_type")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


def _inline(block: Mapping[str, Any]) -> tuple[str | bytes, str | None, bool] | None:
    """``(data, declared media type, base64-encoded?)`` when the block holds its bytes."""
    declared = _declared(block)
    kind = block.get("type")
    if kind == "text-plain" and isinstance(block.get("text"), str):
        return block["text"], declared or "text/plain", False
    if isinstance(block.get("base64"), str | bytes):  # LangChain v1, LlamaIndex via adapter
        return block["base64"], declared, True
    if block.get("source_type") == "base64" and "data" in block:  # LangChain v0
        return block["data"], declared, True
    if block.get("source_type") == "text" and isinstance(block.get("text"), str):
        return block["text"], declared or "text/plain", False
    nested = block.get("file")
    if isinstance(nested, Mapping) and isinstance(nested.get("file_data"), str):  # OpenAI chat
        return _data_url(nested["file_data"], declared)
    if isinstance(block.get("file_data"), str):  # OpenAI responses
        return _data_url(block["file_data"], declared)
    audio = block.get("input_audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
        form = audio.get("format")
        return audio["data"], declared or (f"audio/{form}" if form else None), True
    url = _url(block)
    if url is not None and url.startswith("data:"):
        return _data_url(url, declared)
    source = block.get("source")
    if isinstance(source, Mapping):  # Anthropic
        if source.get("type") == "base64" and "data" in source:
            return source["data"], declared, True
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return source["data"], declared or "text/plain", False
        if source.get("type") == "content" and isinstance(source.get("content"), list | str):
            parts = source["content"]
            text = parts if isinstance(parts, str) else "\n\n".join(
                str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in parts)
            return text, "text/plain", False
    return None


def _data_url(url: str, declared: str | None) -> tuple[str | bytes, str | None, bool]:
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return url, declared, True  # bare base64, as some clients send it
    encoded = ";base64" in match.group("params").lower()
    data = match.group("data")
    return (data if encoded else unquote(data)), declared or match.group("type") or None, encoded


def _url(block: Mapping[str, Any]) -> str | None:
    image = block.get("image_url")
    if isinstance(image, Mapping):
        image = image.get("url")
    for candidate in (block.get("url"), image, block.get("file_url")):
        if isinstance(candidate, str) and candidate:
            return candidate
    if block.get("source_type") == "url" and isinstance(block.get("url"), str):
        return str(block["url"])
    return None


def _reference(block: Mapping[str, Any]) -> tuple[str, str] | None:
    """How a block names a file it does not hold: ``("url" | "path" | "file_id", ...)``."""
    url = _url(block)
    if url is not None and not url.startswith("data:"):
        return "url", url
    source = block.get("source")
    if isinstance(source, Mapping):
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return "url", source["url"]
        if source.get("type") == "file" and source.get("file_id"):
            return "file_id", str(source["file_id"])
    nested = _mapping(block, "file")
    for candidate in (block.get("file_id"), nested.get("file_id"), block.get("id")
                      if block.get("source_type") == "id" else None):
        if candidate:
            return "file_id", str(candidate)
    if isinstance(block.get("path"), str) and block["path"]:
        return "path", block["path"]
    return None


def _name_from(reference: str) -> str:
    path = urlsplit(reference).path if "://" in reference else reference
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])


def _decoded(data: str | bytes, declared: str | None, encoded: bool,
             label: str) -> Attachment | Omission:
    if not encoded:
        payload = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        return Attachment(label=label, media_type=declared, payload=payload)
    try:
        payload = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return _refuse(label, "size", "corrupt", "the base64 data does not decode")
    return Attachment(label=label, media_type=declared, payload=payload)


def _refuse(label: str, stage: Any, reason: Any, detail: str) -> Omission:
    return Omission(label=label, stage=stage, reason=reason, detail=detail)
