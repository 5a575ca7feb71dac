"""Legacy Chinese, Japanese and Korean bytes: which codec gives the language's own characters.

GB2312, EUC-KR and EUC-JP share one byte structure (two bytes from 0xA1 to
0xFE), so the same bytes are valid in all three, and a short text in one
decodes without error in the others; so do Thai in TIS-620 and Russian in
cp866. A general detector scores how messy each reading looks, and for a
sentence of Chinese it can prefer Korean (``中华人民共和国`` read as
``櫓빽훙췽묾뵨벌돨``), for a paragraph of Korean, Thai. What tells the readings
apart is what the characters are: text is made mostly of its language's most
common characters, and a misreading of anything else seldom is.

So each candidate codec decodes the sample strictly (one invalid sequence
rules it out), and its text is scored by how many of its non-ASCII characters
are among its language's most frequent ones: the lists charset-normalizer
itself uses to judge coherence (100 Chinese characters, with their
traditional forms; 79 kanji and the 40 commonest of each kana; 26 Hangul
syllables), a run of one character counted once. A reading's
`CjkReading.evidence` says how unlikely that many common characters are in a
misreading, whose share is at most `CHANCE_SHARE`; a reading is taken when its
evidence reaches the level its use needs and is `MARGIN` times the next
reading's. ``benchmarks/legacy_encodings.py`` measures the rule on labelled
legacy files found on a machine and on sentences written in code.
"""

from __future__ import annotations

import codecs
import math
import re
from functools import cache
from typing import NamedTuple

__all__ = ["CHANCE_SHARE", "EVIDENCE", "FAMILIES", "HZ_SHARE", "MARGIN", "OVERRIDE_EVIDENCE",
           "SWITCH_EVIDENCE", "CjkReading", "cjk_readings", "family_of", "read_cjk", "read_hz",
           "standard_share", "strict_text"]

FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Chinese", ("gb18030",)),
    ("Chinese", ("big5", "cp950", "big5hkscs")),
    ("Korean", ("cp949",)),
    ("Korean", ("johab",)),
    ("Japanese", ("euc_jp", "euc_jis_2004")),
    ("Japanese", ("cp932", "shift_jis_2004")),
)
"""Each byte structure's language and codecs, in the order they are tried.

The first codec that decodes a sample strictly names the reading. GB18030
reads GB2312 and GBK, cp949 reads EUC-KR, cp932 reads Shift-JIS, each with the
same text for what they share, so the narrower ones are not tried (they are
the names the detector gives too); Big5's extensions and JIS X 0213 differ
from the base codec in a few characters, so the base is tried first."""
_STANDARD = {"gb18030": "gb2312", "big5": "big5", "cp949": "euc_kr", "johab": "euc_kr",
             "euc_jp": "euc_jp", "cp932": "shift_jis"}
"""Each family's base standard (GB 2312, Big5, KS X 1001, JIS X 0208), by its first codec:
the characters text in that family is mostly written in; extensions hold rare ones."""

_ALIASES = {"gb2312": "gb18030", "gbk": "gb18030", "euc_kr": "cp949", "shift_jis": "cp932",
            "euc_jisx0213": "euc_jis_2004", "shift_jisx0213": "shift_jis_2004"}
"""Codecs that are not tried, and the family codec that reads the same bytes."""

CHANCE_SHARE = 0.07
"""The share of common characters a misreading stays under: the highest any wrong reading of
chardet's 144 labelled CJK files had was 0.067 (EUC-KR read as GB18030); right ones have
0.17 to 1."""
EVIDENCE = 6.0
"""The evidence a reading needs where the detector found no encoding (the bytes would be
refused): a wrong reading this strong turns up less than once in 400."""
SWITCH_EVIDENCE = 4.0
"""The evidence a reading needs to replace a CJK reading the detector is unsure of.

Unsure: it found other readings as clean (a tie), or its reading is mostly
characters outside its codec's base standard (`standard_share`). The bytes are
CJK text by then; which codec is asked of the `MARGIN`, and the evidence only
has to show the reading is text at all (one sentence of Chinese has about 5)."""
OVERRIDE_EVIDENCE = 12.0
"""The evidence a reading needs to overturn the detector's single-byte code page, or a CJK
reading it is sure of.

More than twice the most that any reading of non-CJK text reached (5.3),
over every piece of 16 to 1,024 bytes of chardet's labelled non-CJK files
(241 files, 18 code pages): the detector picks a single-byte code page
confidently for Thai or Cyrillic, whose letters read as a few kana more often
than by chance. It picks Thai for two sentences of EUC-JP too (one such
reading has evidence 14), and Korean for chat in jamo, which reads as
hiragana in EUC-JP (ㅇㅇ as しし)."""
MARGIN = 3.0
"""How many times the next reading's evidence the chosen reading's must be."""
HZ_SHARE = 0.1
"""The share of common characters HZ text needs: ten times what pairs of ASCII letters give."""

_REPEATS = re.compile(r"([^\x00-\x7f])\1+")
"""A run of one non-ASCII character: counted once (ㅋㅋㅋ, ！！！ are emphasis, not more text)."""
_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")
"""Control characters that no text holds (tab, newline, form feed and carriage return do)."""


class CjkReading(NamedTuple):
    """One codec's strict reading of a sample, scored against its language."""

    encoding: str
    """The codec (its `codecs` name)."""
    language: str
    """Chinese, Japanese or Korean."""
    characters: int
    """Non-ASCII characters in the reading."""
    common: int
    """How many of them are among the language's most common."""

    @property
    def share(self) -> float:
        """The share of the non-ASCII characters that are common ones (0.0 when none)."""
        return self.common / self.characters if self.characters else 0.0

    @property
    def evidence(self) -> float:
        """``n · D(q ‖ CHANCE_SHARE)``: how far the share is from a misreading's, in nats.

        D is the Kullback-Leibler divergence between two coin flips; the chance
        that a wrong reading of ``n`` characters has this many common ones is at
        most ``e^-evidence``. 0.0 when the share is at or below a wrong reading's.
        """
        q, p = self.share, CHANCE_SHARE
        if q <= p:
            return 0.0
        divergence = q * math.log(q / p)
        if q < 1.0:
            divergence += (1 - q) * math.log((1 - q) / (1 - p))
        return self.characters * divergence


def family_of(encoding: str) -> tuple[str, ...] | None:
    """The codecs of `encoding`'s byte structure, or None for a codec that is not CJK."""
    name = codecs.lookup(encoding).name
    name = _ALIASES.get(name, name)
    for _, members in FAMILIES:
        if name in members:
            return members
    return None


def standard_share(sample: bytes, encoding: str, *, cut: bool = False) -> float:
    """The share of distinct non-ASCII characters `encoding` reads that are in its base standard.

    GB18030 and cp949 extend GB 2312 and KS X 1001 with every rare character
    their byte ranges left room for, so almost any two bytes are one of them:
    Shift-JIS read as cp949 is text made of Hangul syllables outside KS X 1001.
    1.0 when `encoding` is not CJK or reads no non-ASCII character; 0.0 when it
    does not decode the sample strictly.
    """
    members = family_of(encoding)
    if members is None:
        return 1.0
    text = strict_text(sample, encoding, cut=cut)
    if text is None:
        return 0.0
    distinct = {ch for ch in set(text) if ch >= "\x80"}
    if not distinct:
        return 1.0
    standard = _STANDARD[members[0]]
    return sum(1 for ch in distinct if _two_bytes_in(ch, standard)) / len(distinct)


def _two_bytes_in(ch: str, codec: str) -> bool:
    try:
        return len(ch.encode(codec)) == 2
    except UnicodeEncodeError:
        return False


def cjk_readings(sample: bytes, *, cut: bool = False) -> list[CjkReading]:
    """Each byte structure's strict reading of `sample`, the strongest evidence first.

    With ``cut=True`` (the sample is the start of a longer payload) a sequence
    cut by the sample's end is not an error. A reading with control characters
    other than tab, newline, form feed and carriage return is not text and is
    left out.
    """
    readings = []
    for language, members in FAMILIES:
        for encoding in members:
            text = strict_text(sample, encoding, cut=cut)
            if text is None:
                continue
            if not _CONTROLS.search(text):
                readings.append(_score(encoding, language, text))
            break
    return sorted(readings, key=lambda reading: -reading.evidence)


def read_cjk(sample: bytes, *, evidence: float = EVIDENCE,
             cut: bool = False) -> tuple[CjkReading, float] | None:
    """The reading of `sample` that is its language's text, and how far it leads; or None.

    Returns the reading with the strongest evidence when that is at least
    `evidence` and `MARGIN` times the next reading's, with ``1 - next evidence /
    its evidence`` (1.0 when no other reading has any).

    Examples:
        >>> reading, lead = read_cjk("中华人民共和国的首都是北京。".encode("gb2312"))
        >>> reading.encoding, reading.language, lead
        ('gb18030', 'Chinese', 1.0)
        >>> read_cjk("Grüße aus Köln".encode("cp1252")) is None
        True
    """
    readings = cjk_readings(sample, cut=cut)
    if not readings or readings[0].evidence < evidence:
        return None
    best = readings[0]
    runner_up = readings[1].evidence if len(readings) > 1 else 0.0
    if runner_up * MARGIN > best.evidence:
        return None
    return best, round(1.0 - runner_up / best.evidence, 3)


def read_hz(sample: bytes, *, cut: bool = False) -> CjkReading | None:
    """7-bit HZ-GB-2312 (RFC 1843): ASCII with ``~{`` ... ``~}`` around GB2312, or None.

    HZ is valid ASCII, so strict UTF-8 would take it first and show
    ``~{<:Ky2;S{~}``. It announces itself, like ISO-2022, but with printable
    characters, so the announcement must hold: the sample decodes strictly (a
    ``~`` may only start ``~{``, ``~}``, ``~~`` or a line continuation, and
    between the braces only pairs that are GB2312 characters may stand, no
    space), which no other ASCII file with ``~{`` on a development machine did
    (64 of them); and at least `HZ_SHARE` of what stands between the braces
    are common Chinese characters.

    Examples:
        >>> read_hz(b"Bye: ~{<:Ky2;S{#,NpJ)l6HK!#~}").encoding
        'hz'
        >>> read_hz(b"cd ~{src,docs} && ls") is None
        True
    """
    if b"~{" not in sample or not sample.isascii():
        return None
    text = strict_text(sample, "hz", cut=cut)
    if text is None or _CONTROLS.search(text):
        return None
    reading = _score("hz", "Chinese", text)
    return reading if reading.common and reading.share >= HZ_SHARE else None


def strict_text(sample: bytes, encoding: str, *, cut: bool = False) -> str | None:
    """`sample` decoded without any replacement (a sequence cut at its end allowed if `cut`)."""
    try:
        return codecs.getincrementaldecoder(encoding)("strict").decode(sample, final=not cut)
    except UnicodeDecodeError:
        return None


def _score(encoding: str, language: str, text: str) -> CjkReading:
    text = _REPEATS.sub(r"\1", text)
    non_ascii = len(text) - len(text.encode("ascii", "ignore"))
    return CjkReading(encoding, language, non_ascii, len(_most_common(language).findall(text)))


_KANA = 40
"""How many of each kana list count, the commonest first.

The kana lists are whole syllabaries (93 hiragana, 96 katakana), so any
reading that lands in their rows would score: Korean jamo do in EUC-JP (ㅋ, ㅎ,
ㅠ read as せ, ぞ, ば). The first 40 of each are 94 % of the hiragana and 84 % of
the katakana in the Japanese text found on a development machine (Rust by
Example, GnuPG's help, chardet's test files); the rarer ones are left out."""
_TRADITIONAL = dict(zip("这个们来为国说时会对着过发经学现当没动还进样开从实于后里么种",
                        "這個們來為國說時會對著過發經學現當沒動還進樣開從實於後裡麼種",
                        strict=True))
"""The traditional form of each common Chinese character whose form differs.

charset-normalizer's Chinese list is simplified characters; 30 of them are
written otherwise in Big5 text (這, 們, 說, 會; 於, 後, 裡, 麼, 種, whose
simplified forms are in Big5 too, with other meanings), and without these a
few sentences of Traditional Chinese score barely above a misreading."""


@cache
def _most_common(language: str) -> re.Pattern[str]:
    """The language's most frequent characters, as charset-normalizer lists them.

    Japanese has three lists (kanji, katakana, hiragana); Chinese adds the
    traditional forms (`_TRADITIONAL`). Without the lists (a charset-normalizer
    that no longer has them) nothing scores, and every decision is the
    detector's again.
    """
    try:
        from charset_normalizer.constant import FREQUENCIES
    except ImportError:  # pragma: no cover - a core dependency; kept for vendored installs
        FREQUENCIES = {}
    chars = {ch for name, listed in FREQUENCIES.items() if name.rstrip("\u2014") == language
             for ch in (listed[:_KANA] if name.endswith("\u2014") else listed)}
    if language == "Chinese":
        chars |= {_TRADITIONAL[ch] for ch in chars if ch in _TRADITIONAL}
    return re.compile("[" + "".join(map(re.escape, sorted(chars))) + "]" if chars else "(?!)")
