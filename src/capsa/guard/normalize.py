"""Text hygiene: decoding untrusted bytes and normalising whatever a parser returned."""

from __future__ import annotations

import codecs
import re
import unicodedata

__all__ = ["UndecodableText", "clean_detail", "decode_text", "normalize"]

_STRIP_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn"})
_KEEP = frozenset("\t\n")
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_MAX_REPLACEMENT_SHARE = 0.05
_SCRATCH = re.compile(r"/[^\s'\"]*?capsa-worker-[^/\s'\"]*(?:/(?:worker|file)-[^/\s'\"]*)*")
"""A path inside an isolated pool's scratch tree (``.../capsa-worker-*/worker-*/file-*``)."""
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class UndecodableText(ValueError):
    """The bytes are not text in any encoding capsa is willing to assume."""


def normalize(text: str) -> str:
    """Return text that is safe to place in a prompt and stable to compare.

    Unix newlines; lone surrogates become U+FFFD (so ``encode("utf-8")`` never
    raises); NFC; control and format characters (C0/C1 except tab and newline,
    bidi overrides, zero-width and tag characters, the BOM) removed; trailing
    spaces removed; runs of more than two blank lines folded. Idempotent:
    ``normalize(normalize(t)) == normalize(t)``.

    Examples:
        >>> normalize("a\\r\\nb\\u200b  \\n\\x1b[2Jc")
        'a\\nb\\n[2Jc'
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():
        # The common case, about 7x faster: NFC is the identity on ASCII and
        # the only characters to strip are the C0 controls and DEL.
        text = _TRAILING.sub("", _ASCII_CONTROL.sub("", text))
        return re.sub(r"\n{4,}", "\n\n\n", text).strip("\n")
    text = _SURROGATE.sub("\ufffd", text)
    text = unicodedata.normalize("NFC", text)
    text = "".join(
        ch for ch in text if ch in _KEEP or unicodedata.category(ch) not in _STRIP_CATEGORIES
    )
    text = _TRAILING.sub("", text)
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    # Removing characters can expose new trailing spaces or NFC compositions; a
    # second pass is cheap and makes the function idempotent.
    text = unicodedata.normalize("NFC", _TRAILING.sub("", text))
    return text.strip("\n")


def clean_detail(detail: object, *, limit: int = 2000) -> str:
    """A refusal's detail made safe to print and serialise: one normalised line, capped.

    Parser error messages are attacker-influenced (they quote the file); this
    removes terminal escapes' control characters, lone surrogates and line
    breaks, and replaces the worker's private scratch paths with
    ``<scratch>``. The text is cut to a few times `limit` before any of that
    runs, so a detail quoting megabytes of input costs microseconds.

    Examples:
        >>> clean_detail("bad \\x1b]8;;x\\x07link\\n\\ud800")
        'bad ]8;;xlink \ufffd'
        >>> clean_detail("No such file: '/tmp/capsa-worker-1a/worker-2b/file-3c/x.docx'")
        "No such file: '<scratch>/x.docx'"
    """
    text = _SCRATCH.sub("<scratch>", str(detail)[: 4 * limit])
    text = " ".join(normalize(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decode_text(payload: bytes) -> str:
    """Decode bytes of unknown encoding without guessing code pages.

    Order: a byte-order mark; UTF-16 when the pattern of NUL bytes says so
    (ASCII-range UTF-16 is also valid UTF-8, so this comes first); strict
    UTF-8; otherwise UTF-8 with replacement. Any decode that replaced more
    than 5 % of the characters is refused (silent mojibake is worse than a
    reason).

    Raises:
        UndecodableText: the replacement share is over 5 %.
    """
    for bom, encoding in _BOMS:
        if payload.startswith(bom):
            return _checked(payload[len(bom):].decode(encoding, "replace"))
    # UTF-16 of mostly ASCII text is also valid UTF-8 (full of NULs), so the
    # NUL pattern is checked before strict UTF-8.
    sample = payload[:4096]
    if len(sample) >= 2:
        even_nuls = sample[0::2].count(0) / max(1, len(sample[0::2]))
        odd_nuls = sample[1::2].count(0) / max(1, len(sample[1::2]))
        if odd_nuls > 0.3 and even_nuls < 0.05:
            return _checked(payload.decode("utf-16-le", "replace"))
        if even_nuls > 0.3 and odd_nuls < 0.05:
            return _checked(payload.decode("utf-16-be", "replace"))
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        pass
    return _checked(payload.decode("utf-8", "replace"))


def _checked(text: str) -> str:
    replaced = text.count("\ufffd")
    if replaced > _MAX_REPLACEMENT_SHARE * max(1, len(text)):
        raise UndecodableText(
            f"{replaced} of {len(text)} characters are not valid UTF-8 "
            f"(over the {_MAX_REPLACEMENT_SHARE:.0%} share capsa accepts)"
        )
    return text
