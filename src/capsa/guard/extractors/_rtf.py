"""RTF's escaped characters as Unicode, before pandoc reads the file.

RTF writes every character outside ASCII as an escape: ``\\'hh``, one byte of
a code page (the document's ``\\ansicpg``, or the current font's
``\\fcharset``: WordPad writes Czech as cp1250 bytes under a ``\\fcharset238``
font, Word writes Japanese as cp932 byte pairs), or ``\\uN`` followed by
``\\ucN`` fallback characters for readers that know no Unicode. pandoc, which
unstructured's ``partition_rtf`` runs, reads every ``\\'hh`` as cp1252 (it
warns "Unsupported code page" on stderr, which nobody sees), so Czech, Polish,
Russian and Japanese came out as silent mojibake; and after ``\\u8201?`` it
skipped the letter that follows the ``?`` as well.

`decode_escapes` writes each such character out as itself, in UTF-8, which
pandoc reads as text: escapes decoded in the code page in force where they
stand, ``\\uN`` with its fallback characters dropped. Everything else (groups,
control words, ``\\bin`` data) is copied as it was, so pandoc still sees the
document's structure.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["decode_escapes"]

_CHARSETS = {
    0: None, 128: "cp932", 129: "cp949", 130: "johab", 134: "gbk", 136: "cp950",
    161: "cp1253", 162: "cp1254", 163: "cp1258", 177: "cp1255", 178: "cp1256",
    186: "cp1257", 204: "cp1251", 222: "cp874", 238: "cp1250", 255: "cp437",
}
"""``\\fcharset`` numbers and the code page each names; 0 (ANSI) means ``\\ansicpg``.
Symbol (2) and the rest fall back to ``\\ansicpg`` too."""

_TOKEN = re.compile(rb"\\'([0-9a-fA-F]{2})|\\([a-z]{1,32})(-?\d{1,10})? ?|\\.|[{}]|[^\\{}]+",
                    re.DOTALL)
_OPEN_WORD = re.compile(rb"\\[a-z]{1,32}-?\d*\Z")
"""A control word with no delimiter after it yet."""
_SPECIAL = str.maketrans({"\\": "\\\\", "{": "\\{", "}": "\\}"})
"""Characters that would be RTF syntax if written out as themselves."""


def _text(characters: str) -> bytes:
    return characters.translate(_SPECIAL).encode("utf-8", errors="replace")


def _codec(number: int | None) -> str | None:
    if number is None:
        return None
    name = f"cp{number}"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_escapes(rtf: bytes) -> bytes:
    """`rtf` with every ``\\'hh`` and ``\\uN`` written as the character it stands for.

    Returns `rtf` unchanged when it has neither.

    Examples:
        >>> rtf = rb"{\\rtf1\\ansi\\ansicpg1251 \\'cf\\'f0\\'e8\\'e2\\'e5\\'f2\\u8201?x}"
        >>> decode_escapes(rtf).decode()
        '{\\\\rtf1\\\\ansi\\\\ansicpg1251 Привет\\u2009x}'
    """
    if b"\\'" not in rtf and b"\\u" not in rtf:
        return rtf
    out: list[bytes] = []
    ansi = "cp1252"
    fonts: dict[int, str | None] = {}
    # per group: (current font, fallback characters after \uN, inside the font table)
    stack: list[tuple[int | None, int, bool]] = []
    font: int | None = None
    skip_after_unicode = 1
    in_font_table = False
    table_font: int | None = None
    pending = bytearray()  # \'hh bytes waiting to be decoded together (double-byte pairs)
    skip = 0  # fallback characters still to drop after a \uN
    high: int | None = None  # a \uN that opened a surrogate pair
    position = 0

    def write(characters: str) -> None:
        # A control word written just before ends at a space, which the reader takes
        # as its delimiter: pandoc otherwise drops the character after one (``\uc1‘``).
        if out and _OPEN_WORD.search(out[-1]):
            out.append(b" ")
        out.append(_text(characters))

    def flush() -> None:
        if pending:
            code = fonts.get(font) if font is not None else None
            write(bytes(pending).decode(code or ansi, errors="replace"))
            pending.clear()

    while position < len(rtf):
        match = _TOKEN.match(rtf, position)
        if match is None:  # a lone backslash at the end
            flush()
            out.append(rtf[position:])
            break
        position = match.end()
        token = match.group()
        if match.group(1) is not None:  # \'hh
            if skip:
                skip -= 1
                continue
            pending.append(int(match.group(1), 16))
            continue
        word, number = match.group(2), match.group(3)
        if skip and word is None and token not in (b"{", b"}"):
            # a fallback character: one plain character (a run counts its characters)
            if token.startswith(b"\\"):
                skip -= 1
                continue
            dropped = min(skip, len(token))
            skip -= dropped
            token = token[dropped:]
            if not token:
                continue
        skip = 0 if token in (b"{", b"}") else skip
        flush()
        if token == b"{":
            stack.append((font, skip_after_unicode, in_font_table))
        elif token == b"}":
            if stack:
                font, skip_after_unicode, in_font_table = stack.pop()
        elif word == b"bin" and number is not None:  # raw bytes: copied untouched
            size = max(0, int(number))
            out.append(token)
            out.append(rtf[position:position + size])
            position += size
            continue
        elif word == b"u" and number is not None:
            value = int(number) % 65536
            if 0xD800 <= value < 0xDC00:  # the first half of a pair: wait for the second
                high = value
            else:
                if 0xDC00 <= value < 0xE000 and high is not None:  # outside the BMP (emoji)
                    value = 0x10000 + ((high - 0xD800) << 10) + (value - 0xDC00)
                write(chr(value) if not 0xD800 <= value < 0xE000 else "\ufffd")
                high = None
            skip = skip_after_unicode
            continue
        elif word == b"uc" and number is not None:
            skip_after_unicode = max(0, int(number))
        elif word == b"ansicpg" and number is not None:
            ansi = _codec(int(number)) or ansi
        elif word == b"fonttbl":
            in_font_table = True
        elif word == b"f" and number is not None:
            if in_font_table:
                table_font = int(number)
            else:
                font = int(number)
        elif word == b"deff" and number is not None:
            font = int(number)
        elif word == b"fcharset" and number is not None and in_font_table \
                and table_font is not None:
            fonts[table_font] = _CHARSETS.get(int(number))
        out.append(token)
    flush()
    return b"".join(out)

