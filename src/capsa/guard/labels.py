"""Turning an untrusted file name into a label that is safe to show and to quote."""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["MAX_LABEL_CHARS", "safe_label"]

MAX_LABEL_CHARS = 255
_RAW_KEEP = 512
"""Characters kept from each end of an over-long raw name before any normalisation."""
_SPACE = re.compile(r"\s+")
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_RESERVED = frozenset({"", ".", ".."})


def safe_label(raw: str | None, *, index: int = 0) -> str:
    """Return a display label for an untrusted file name: one short line, no path.

    The label is never used as a path; it names the file in reports and in the
    prompt container. A raw name longer than 1,024 characters is cut to its
    first and last 512 before anything else runs (NFKC can multiply a
    character eighteenfold, so a 6 MiB name must never reach it whole), and
    then always gains the hash of the whole raw name. NFKC runs before the path strip, so full-width
    ``．．／etc／passwd`` loses its directories like the ASCII form. Control,
    format (bidi, zero-width, tag), surrogate and line/paragraph separator
    characters are removed, white space is collapsed, and a name over
    `MAX_LABEL_CHARS` keeps its extension and gains a short hash so two long
    names stay distinct.

    Args:
        raw: the name as it arrived; may be empty or None.
        index: position of the file in its set, used for the fallback
            ``attachment-N`` when nothing printable remains.

    Examples:
        >>> safe_label("../../etc/passwd")
        'passwd'
        >>> safe_label("report\\u202efdp.exe")
        'reportfdp.exe'
        >>> safe_label("  ", index=3)
        'attachment-3'
    """
    raw = raw or ""
    digest = None
    if len(raw) > 2 * _RAW_KEEP:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        raw = raw[:_RAW_KEEP] + raw[-_RAW_KEEP:]
    text = unicodedata.normalize("NFKC", raw)
    text = text.replace("\\", "/").rsplit("/", 1)[-1]
    text = "".join(
        " " if ch in "\t\n\r\v\f" else ch
        for ch in text
        if ch in "\t\n\r\v\f" or unicodedata.category(ch) not in _DROP_CATEGORIES
    )
    text = _SPACE.sub(" ", text).strip()
    text = unicodedata.normalize("NFC", text)
    if text.strip(".") == "" or text in _RESERVED:
        return f"attachment-{index}"
    if len(text) > MAX_LABEL_CHARS or digest is not None:
        text = _shorten(text, digest)
    return text


def _shorten(text: str, digest: str | None) -> str:
    if digest is None:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem, dot, ext = text.rpartition(".")
    if not dot or len(ext) > 16 or not stem:
        stem, ext = text, ""
    suffix = f"~{digest}" + (f".{ext}" if ext else "")
    return stem[: MAX_LABEL_CHARS - len(suffix)] + suffix
