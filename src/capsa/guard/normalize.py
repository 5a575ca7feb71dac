"""Text hygiene: decoding untrusted bytes and normalising whatever a parser returned."""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Iterator
from typing import NamedTuple

from capsa.guard.cjk import (
    EVIDENCE,
    OVERRIDE_EVIDENCE,
    SWITCH_EVIDENCE,
    cjk_readings,
    family_of,
    read_cjk,
    read_hz,
    standard_share,
    strict_text,
)

__all__ = [
    "DecodedText", "UndecodableText", "clean_detail", "decode_text", "detect_and_decode",
    "normalize",
]

_STRIP_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn"})
_BLANK_RUN = re.compile(r"\n{4,}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_NON_ASCII_RUN = re.compile("[^\x00-\x7f]+")
_MAX_REPLACEMENT_SHARE = 0.05
_SAMPLE_BYTES = 65536
_DAMAGED_UTF8_SHARE = 0.005
_MULTIBYTE_UTF8 = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|"
                             rb"[\xf0-\xf4][\x80-\xbf]{3}")
_JOINERS = frozenset("\u200c\u200d")
_PRESENTATION_TAGS = ("<compat>", "<font>", "<isolated>", "<initial>", "<medial>", "<final>")
_LIGATURES = {
    code: letters
    for block in (range(0xFB00, 0xFE00), range(0xFE70, 0xFF00))
    for code in block
    if unicodedata.decomposition(chr(code)).startswith(_PRESENTATION_TAGS)
    and len(letters := unicodedata.normalize("NFKC", chr(code))) <= 3}
"""Presentation forms as their letters: the Latin ligatures (``ﬁ``, ``ﬂ``, ``ﬃ``), Hebrew's
and Armenian's, and the Arabic letters' contextual shapes. They are glyphs a typesetter
chose, not letters anyone types: pdflatex's text layer is full of ligatures and older
producers' Arabic of shapes, and kept, ``deﬁnition`` matches no search for "definition".
The few that spell a whole phrase (U+FDFA is 18 letters) stay as they are, so the text
grows by at most three times, as NFC may."""
# U+1F3F4, two to six tag letters or digits, CANCEL TAG: the RGI subdivision flags'
# shape. Too short to smuggle a sentence, which is why other tag runs go.
_EMOJI_TAG_SEQUENCE = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]"
                                 "{2,6}\U000e007f")
_SCRATCH = re.compile(r"/[^\s'\"]*?capsa-worker-[^/\s'\"]*(?:/(?:worker|file)-[^/\s'\"]*)*")
"""A path inside an isolated pool's scratch tree (``.../capsa-worker-*/worker-*/file-*``)."""
_SCRATCH_RUN = re.compile(
    r"(?<![^\s'\"])[^\s'\"]*capsa-worker-[^/\s'\"]*(?:/(?:worker|file)-[^/\s'\"]*)*")
"""A run of path characters, from its start up to its last scratch path: the only text
`_SCRATCH` can match in. Tried once per run (the look-behind), it keeps the scrub linear;
`_SCRATCH` alone tries every ``/`` and scans to the run's end from each (quadratic)."""
_ISO2022_DESIGNATIONS: tuple[tuple[re.Pattern[bytes], tuple[str, ...]], ...] = (
    # ISO-2022-KR announces KS X 1001 once, in its first line (RFC 1557)
    (re.compile(rb"\x1b\$\)C"), ("iso2022_kr",)),
    # ISO-2022-JP (RFC 1468) and its extensions: JIS X 0208, JIS X 0212, GB 2312, KS C 5601
    (re.compile(rb"\x1b(?:\$[@B]|\$\([DOPQ]|\$A|\$\(C|\(J|\(I)"),
     ("iso2022_jp", "iso2022_jp_2", "iso2022_jp_2004", "iso2022_jp_ext")),
)
"""Escape sequences that designate a 7-bit ISO-2022 character set, and the codecs to try.

Such text is pure ASCII bytes, so it is valid UTF-8 too; read as UTF-8, the
escapes are stripped as control characters and the Japanese or Korean becomes
runs of Latin letters and punctuation (``$B%F%9%H``). The designations are
unambiguous, so they are checked before UTF-8."""

_MOSTLY_STANDARD = 0.5
"""A CJK reading with fewer of its distinct characters in its codec's base standard is the
detector's guess, not its finding: real text keeps to the standard, a misreading in GB18030's
or cp949's extensions does not."""

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
    raises); NFC; presentation forms (``ﬁ``, Arabic letter shapes) as their
    letters; control and format
    characters (C0/C1 except tab and newline, bidi overrides, zero-width and
    tag characters, the BOM) removed; trailing spaces removed; runs of more
    than two blank lines folded. Idempotent:
    ``normalize(normalize(t)) == normalize(t)``.

    Examples:
        >>> normalize("a\\r\\nb\\u200b  \\n\\x1b[2Jc")
        'a\\nb\\n[2Jc'
    """
    if len(text) <= _CHUNK_CHARS:
        return _fold_blank_lines(_normalize_lines(text)).strip("\n")
    # A long text is normalised a piece at a time, each cut after a newline: every
    # step but the folding of blank lines is local to a line, and a whole text at
    # once held many times its size (a list of its lines, several copies).
    return _fold_blank_lines("".join(map(_normalize_lines, _pieces(text)))).strip("\n")


_CHUNK_CHARS = 65_536
"""Characters `normalize` handles at once (more only when a line is longer)."""


def _pieces(text: str) -> Iterator[str]:
    """`text` in consecutive pieces of about `_CHUNK_CHARS`, each ending after a newline."""
    start = 0
    while start < len(text):
        cut = text.find("\n", start + _CHUNK_CHARS)
        end = len(text) if cut < 0 else cut + 1
        yield text[start:end]
        start = end


def _normalize_lines(text: str) -> str:
    """Every step of `normalize` but folding blank lines and stripping the ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():
        # The common case, about 7x faster: NFC is the identity on ASCII and
        # the only characters to strip are the C0 controls and DEL.
        return _strip_trailing(_ASCII_CONTROL.sub("", text))
    if _has_surrogates(text):
        text = _SURROGATE.sub("\ufffd", text)
    text = unicodedata.normalize("NFC", text).translate(_LIGATURES)
    # Emoji tag sequences (the flags of England, Scotland, Wales) are kept
    # whole; every other tag character is removed (they smuggle invisible ASCII).
    pieces = _EMOJI_TAG_SEQUENCE.split(text)
    flags = _EMOJI_TAG_SEQUENCE.findall(text)
    text = "".join(_strip_format(piece) + (flags[i] if i < len(flags) else "")
                   for i, piece in enumerate(pieces))
    # Removing characters can expose new trailing spaces or NFC compositions; a
    # second pass is cheap and makes the function idempotent.
    return unicodedata.normalize("NFC", _strip_trailing(text))


def _strip_trailing(text: str) -> str:
    """Spaces and tabs at the end of every line removed (5x faster than a multiline regex)."""
    if " \n" not in text and "\t\n" not in text and not text.endswith((" ", "\t")):
        return text  # most text: nothing to strip, and no list of its lines to build
    return "\n".join(line.rstrip(" \t") for line in text.split("\n"))


def _fold_blank_lines(text: str) -> str:
    """Runs of more than two blank lines folded to two."""
    return _BLANK_RUN.sub("\n\n\n", text) if "\n\n\n\n" in text else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _strip_format(text: str) -> str:
    """Remove control and format characters, keeping joiners that join two visible letters.

    ZWNJ and ZWJ change how Persian, Arabic and Indic words are written and
    hold emoji sequences together (man, ZWJ, woman, ZWJ, girl is one family
    emoji), so they stay between two visible non-ASCII characters; next to
    ASCII, or anything invisible, they are removed like any other format
    character (a ZWJ inside ``</attachment>`` is an evasion, not a spelling).
    """
    last = len(text) - 1

    def strip_run(run: re.Match[str]) -> str:
        kept: list[str] = []
        for index in range(run.start(), run.end()):
            ch = text[index]
            joins = (ch in _JOINERS and 0 < index < last and _visible_letter(text[index - 1])
                     and _visible_letter(text[index + 1]))
            if joins or unicodedata.category(ch) not in _STRIP_CATEGORIES:
                kept.append(ch)
        return "".join(kept)

    # Only non-ASCII characters need their category looked up one by one; every
    # decision reads the original text, so the two passes give what one would.
    return _ASCII_CONTROL.sub("", _NON_ASCII_RUN.sub(strip_run, text))


def _visible_letter(ch: str) -> bool:
    return not ch.isascii() and unicodedata.category(ch) not in _STRIP_CATEGORIES


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
    text = _hide_scratch(str(detail)[: 4 * limit])
    text = " ".join(normalize(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hide_scratch(text: str) -> str:
    """Every scratch path in `text` replaced with ``<scratch>``, in linear time.

    `_SCRATCH` is applied only inside a run `_SCRATCH_RUN` found, which ends where its
    last match ends, so no ``/`` it tries there fails after a long scan.
    """
    return _SCRATCH_RUN.sub(lambda run: _SCRATCH.sub("<scratch>", run.group()), text)


class DecodedText(NamedTuple):
    """Text decoded from bytes, and how."""

    text: str
    encoding: str | None
    """None for UTF-8 (the default every reader assumes); otherwise the codec used."""
    confidence: float | None
    """1.0 for a byte-order mark; the detector's estimate for a guessed code page."""


def decode_text(payload: bytes) -> str:
    """Decode bytes of unknown encoding; see `detect_and_decode` for the order.

    Raises:
        UndecodableText: no encoding gives text with under 5 % replacement characters.
    """
    return detect_and_decode(payload).text


def detect_and_decode(payload: bytes, *, code_pages: bool = True) -> DecodedText:
    """Decode bytes of unknown encoding, saying which encoding it took.

    Order: a byte-order mark; UTF-32 or UTF-16 when the pattern of NUL bytes
    says so (ASCII-range UTF-16 is also valid UTF-8, so this comes first);
    7-bit ISO-2022-JP or -KR by their escapes, and HZ by its ``~{`` escapes
    when it decodes strictly and reads as Chinese (`read_hz`); strict UTF-8;
    BOM-less UTF-16 of CJK text (few NULs, all on one side); UTF-8 with a few
    replacements when it has valid multi-byte sequences (damaged UTF-8); then a
    legacy code page (cp1252, GBK, Shift-JIS, cp1256, ...) detected by
    `charset-normalizer` on at most the first 64 KiB, cut at a line or word end.
    Among encodings the detector finds equally clean, cp1252 wins, as in
    browsers. A strict CJK reading whose characters are its language's common
    ones (`read_cjk`) corrects the detector: it picks GB18030 for a sentence
    of Chinese the detector took for Korean, and EUC-KR that it found nothing
    for. Any decode that replaced more than 5 % of the characters is refused
    (silent mojibake is worse than a reason), and so is text only CJK codecs
    read, none of them as its language.

    ``code_pages=False`` skips the detector and HZ (for sniffing, which must stay
    cheap on any input): such bytes are then decoded as lenient UTF-8.

    Raises:
        UndecodableText: the replacement share is over 5 %, or only CJK codecs read
            the bytes and none of them as text in its language.

    Examples:
        >>> detect_and_decode("Café".encode("utf-8"))
        DecodedText(text='Café', encoding=None, confidence=None)
        >>> detect_and_decode("\ufeffhi".encode("utf-16-le")).encoding
        'utf-16-le'
    """
    for bom, encoding in _BOMS:
        if payload.startswith(bom):
            text = _checked(payload[len(bom):].decode(encoding, "replace"))
            if encoding == "utf-8":
                return DecodedText(text, None, None)
            return DecodedText(text, encoding, 1.0)
    wide = _wide_unicode(payload[:_SAMPLE_BYTES])
    if wide is not None:
        return DecodedText(_checked(payload.decode(wide, "replace")), wide, 1.0)
    iso2022 = _iso2022(payload)
    if iso2022 is not None:
        return iso2022
    if code_pages and read_hz(payload[:_SAMPLE_BYTES],
                              cut=len(payload) > _SAMPLE_BYTES) is not None:
        return DecodedText(_checked(payload.decode("hz", "replace")), "hz", 1.0)
    try:
        return DecodedText(payload.decode("utf-8"), None, None)
    except UnicodeDecodeError:
        pass
    sparse = _sparse_utf16(payload[:_SAMPLE_BYTES])
    if sparse is not None:
        return DecodedText(_checked(payload.decode(sparse, "replace")), sparse, 1.0)
    lenient = payload.decode("utf-8", "replace")
    if _MULTIBYTE_UTF8.search(payload[:_SAMPLE_BYTES]) and (
            lenient.count("\ufffd") <= max(1.0, _DAMAGED_UTF8_SHARE * len(lenient))):
        # Valid multi-byte sequences and a stray bad byte: damaged UTF-8, not a code page.
        return DecodedText(lenient, None, None)
    if not code_pages:
        return DecodedText(_checked(lenient), None, None)
    sample = _code_page_sample(payload)
    cut = len(sample) < len(payload)
    guess = _detect_code_page(sample, cut=cut)
    if guess is not None:
        encoding, confidence = guess
        return DecodedText(_checked(payload.decode(encoding, "replace")), encoding, confidence)
    _refuse_unread_cjk(sample, lenient, cut=cut)
    return DecodedText(_checked(lenient), None, None)


def _code_page_sample(payload: bytes) -> bytes:
    """The first 64 KiB, cut after its last newline or space when the payload goes on.

    A cut inside a two-byte character left the sample's last byte invalid in
    every CJK codec, and the detector then found no encoding at all for 70 KB of
    EUC-KR. No byte below 0x30 is part of a multi-byte character in any of them.
    """
    if len(payload) <= _SAMPLE_BYTES:
        return payload
    sample = payload[:_SAMPLE_BYTES]
    end = max(sample.rfind(b"\n"), sample.rfind(b" ")) + 1
    return sample[:end] if end else sample


def _refuse_unread_cjk(sample: bytes, lenient: str, *, cut: bool) -> None:
    """Refuse, naming them, bytes that CJK codecs read strictly but not as their language.

    The detector found nothing, and each strict reading has too few of its
    language's common characters to be told from a misreading (a list of rare
    syllables, binary that happens to be valid): taking the only reading, or
    the first of two, would be a guess. Raises nothing when no CJK codec reads
    the sample, or when lenient UTF-8 is acceptable anyway.
    """
    if lenient.count("\ufffd") <= _MAX_REPLACEMENT_SHARE * max(1, len(lenient)):
        return
    readings = cjk_readings(sample, cut=cut)
    if readings:
        listed = "; ".join(f"as {r.encoding}, {r.common} of its {r.characters} characters are "
                           f"common in {r.language}" for r in readings)
        raise UndecodableText(
            "not UTF-8 and in no code page the detector recognised; it decodes strictly "
            f"{listed}: too few to tell text from a misreading")


def _iso2022(payload: bytes) -> DecodedText | None:
    """7-bit ISO-2022-JP or -KR text, when it designates a character set and decodes cleanly."""
    sample = payload[:_SAMPLE_BYTES]
    if b"\x1b" not in sample or not sample.isascii():
        return None
    for designation, encodings in _ISO2022_DESIGNATIONS:
        if designation.search(sample):
            for encoding in encodings:
                try:
                    return DecodedText(payload.decode(encoding), encoding, 1.0)
                except UnicodeDecodeError:
                    continue
    return None


def _wide_unicode(sample: bytes) -> str | None:
    """UTF-32 or UTF-16 without a BOM, recognised by where the NUL bytes fall."""
    if len(sample) < 4 or 0 not in sample:
        return None
    quads = [sample[i::4].count(0) / max(1, len(sample[i::4])) for i in range(4)]
    if quads[2] > 0.9 and quads[3] > 0.9 and quads[0] < 0.5:
        return "utf-32-le" if _decodes(sample, "utf-32-le") else None
    if quads[0] > 0.9 and quads[1] > 0.9 and quads[3] < 0.5:
        return "utf-32-be" if _decodes(sample, "utf-32-be") else None
    even_nuls = sample[0::2].count(0) / max(1, len(sample[0::2]))
    odd_nuls = sample[1::2].count(0) / max(1, len(sample[1::2]))
    if odd_nuls > 0.3 and even_nuls < 0.05:
        return "utf-16-le"
    if even_nuls > 0.3 and odd_nuls < 0.05:
        return "utf-16-be"
    return None


def _sparse_utf16(sample: bytes) -> str | None:
    """UTF-16 of CJK text: few NULs (its ASCII spaces, digits, line ends), all on one side.

    Tried only after strict UTF-8 failed: ASCII with a stray NUL is UTF-8.
    """
    if len(sample) < 4 or len(sample) % 2 or 0 not in sample:
        return None
    even_nuls, odd_nuls = sample[0::2].count(0), sample[1::2].count(0)
    for encoding, nuls, other in (("utf-16-le", odd_nuls, even_nuls),
                                  ("utf-16-be", even_nuls, odd_nuls)):
        if nuls > 0 and other == 0 and _decodes(sample, encoding):
            return encoding
    return None


def _decodes(sample: bytes, encoding: str) -> bool:
    unit = 4 if "32" in encoding else 2
    try:
        text = sample[: len(sample) - len(sample) % unit].decode(encoding)
    except UnicodeDecodeError:
        return False
    controls = sum(1 for ch in text if ch < " " and ch not in "\t\n\r")
    return controls <= 0.01 * len(text)


def _detect_code_page(sample: bytes, *, cut: bool) -> tuple[str, float] | None:
    """The detector's code page, unless a CJK reading shows it misread CJK text.

    charset-normalizer judges how messy each reading looks, which for a short
    CJK text often prefers the wrong one of GB2312, EUC-KR and EUC-JP (the
    same bytes are valid in all three), sometimes Thai; and it finds nothing
    when a file's rare characters look messy. `read_cjk` judges what the
    characters are, and the evidence it needs grows with what it overturns: a
    CJK reading the detector is unsure of (`SWITCH_EVIDENCE`: a tie, or a
    reading mostly outside its codec's base standard, as Shift-JIS read as
    cp949 is), no reading at all (`EVIDENCE`), a single-byte code page or a CJK
    reading the detector is sure of (`OVERRIDE_EVIDENCE`). When both name the
    same byte structure (EUC-JP as ``euc_jis_2004``), the detector's name
    stands. `cut` says the sample is the start of a longer payload.
    """
    guess = _detector_guess(sample)
    if guess is None:
        needed = EVIDENCE
    elif family_of(guess.encoding) is not None and (
            guess.tied or standard_share(sample, guess.encoding, cut=cut) < _MOSTLY_STANDARD):
        needed = SWITCH_EVIDENCE
    else:
        needed = OVERRIDE_EVIDENCE
    confident = read_cjk(sample, evidence=needed, cut=cut)
    if confident is None:
        return None if guess is None else (guess.encoding, guess.confidence)
    reading, lead = confident
    if (guess is not None and family_of(guess.encoding) == family_of(reading.encoding)
            and strict_text(sample, guess.encoding, cut=cut) is not None):
        return guess.encoding, guess.confidence
    return reading.encoding, lead


class _Guess(NamedTuple):
    encoding: str
    confidence: float
    tied: bool
    """Other readings were as clean (within 0.02 of chaos): the detector could not tell."""


def _detector_guess(sample: bytes) -> _Guess | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - a core dependency; kept for vendored installs
        return None
    matches = list(from_bytes(sample))
    if not matches:
        return None
    best = matches[0]
    ties = [m for m in matches if m.chaos <= best.chaos + 0.02]
    names = [_codec_name(m.encoding) for m in ties]
    tied = len(ties) > 1
    confidence = round(max(0.0, 1.0 - best.chaos) / (2 if tied else 1), 3)
    # A match stands for every code page that reads the sample the same way
    # (`could_be_from_charset`): cp1252 is often filed under cp1250's.
    readers = {_codec_name(name) for m in ties for name in m.could_be_from_charset}
    if "cp1252" in names or "cp1252" in readers:
        return _Guess("cp1252", confidence, tied)
    if names[0].startswith(("utf-16", "utf-32")) and len(sample) < 64:
        # A few bytes of Latin-1 decode as two or three "CJK" characters too.
        try:
            text = sample.decode("cp1252")
        except UnicodeDecodeError:
            text = ""
        if text and all(ch >= " " or ch in "\t\n\r" for ch in text):
            return _Guess("cp1252", 0.5, tied)
    return _Guess(names[0], confidence, tied)


def _codec_name(name: str) -> str:
    return codecs.lookup(name).name


def _checked(text: str) -> str:
    replaced = text.count("\ufffd")
    if replaced > _MAX_REPLACEMENT_SHARE * max(1, len(text)):
        raise UndecodableText(
            f"{replaced} of {len(text)} characters are not valid UTF-8 or in any encoding "
            f"the detector recognised (over the {_MAX_REPLACEMENT_SHARE:.0%} share capsa "
            "accepts)"
        )
    return text
