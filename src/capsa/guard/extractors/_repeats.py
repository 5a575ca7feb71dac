"""Whether an e-mail's text part only repeats the message body, measured on words.

`capsa.guard.extractors.mail` hands every text part the body does not show
back as a file of its own. Some mailers put a second rendering of the body
beside it instead of inside ``multipart/alternative`` (a ``text/plain`` next to
a ``multipart/related`` HTML body, plain and HTML side by side in
``multipart/mixed``), and that file would bring the same words into the
context twice. This module decides, cheaply and on untrusted bytes, whether a
part's words are already in the body's.

Words are runs of letters and digits (``\\w+``), case-folded. Chinese,
Japanese, Korean, Thai, Lao, Khmer and Burmese are written without spaces
between words (Korean with spaces a wrapper may still break between), so
there a run is a whole sentence, and a plain rendering's line wraps cut it
wherever its width falls: the HTML's ``会议改到星期四`` is the plain part's
``会议改`` and ``到星期四``. Text in those scripts is compared as the pairs of
adjacent characters it holds, white space between two such characters skipped,
which no line break can change: each pair counts as one word. A part repeats
the body when both hold:

- at least `DUPLICATE_SHARE` of its distinct words are among the body's (a
  part of fewer than `FEW_WORDS` distinct words, where a share means little,
  instead needs its words in the body in the same order, one after another);
- at least `COVER_SHARE` of the body's distinct words are among its own: a
  second rendering says what the body says, where a list footer or a quoted
  line whose words the body happens to hold says a sliver of it.

When either side is HTML, the link targets, image sources and alternative
texts of its tags count among its words for the other side's share: a plain
rendering spells them out (``text <https://...>``, ``[cid:image001.png@...]``,
``[image: logo]``).

The work is bounded: a part longer than `COMPARED_BYTES` is kept uncompared
(its tail could say anything), the body's words are read from its first
`COMPARED_BYTES`, each comparison costs time in proportion to the part alone,
and once `BUDGET_BYTES` have been spent in one message the remaining parts are
kept uncompared, as they were before. HTML becomes text through regular
expressions that never scan past the next ``<``, so it is linear in its size
whatever its nesting or its unclosed tags: the standard library's
`html.parser` is not (on Python 3.11, 64 KiB of ``<a `` repeated took 34 s,
and ``<![`` repeated raised `AssertionError`). A part that cannot be compared
is kept.
"""

from __future__ import annotations

import codecs
import html
import re
from dataclasses import dataclass
from email.message import Message

__all__ = ["BUDGET_BYTES", "COMPARED_BYTES", "COVER_SHARE", "DUPLICATE_SHARE", "FEW_WORDS",
           "BodyWords", "Overlap", "RepeatedPart", "declared_text", "part_words", "words"]

DUPLICATE_SHARE = 0.9
"""Share of a part's distinct words that must be in the body for the part to repeat it."""
COVER_SHARE = 0.5
"""Share of the body's distinct words that must be in the part for the part to repeat it."""
FEW_WORDS = 6
"""Fewest distinct words a part needs to be judged by share; fewer must appear in order."""
COMPARED_BYTES = 256 * 1024
"""Decoded bytes of the body whose words are read; a longer part is not compared at all."""
BUDGET_BYTES = 1024 * 1024
"""Bytes of parts (and of the body's words searched in order) compared in one message;
once spent, later parts are kept uncompared."""

_UNSPACED = ("\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007"
             "\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
             "\uac00-\ud7ff\uf900-\ufaff\uff66-\uffdc\U00020000-\U0003134f")
"""Scripts written without spaces a wrapper must keep (their marks included, which ``\\w``
leaves out): Thai, Lao, Burmese, Hangul jamo, Khmer, the ideographic iteration marks, kana,
Hangul compatibility jamo and syllables, CJK ideographs and their extensions, halfwidth kana
and Hangul."""
# A word: a run of unspaced characters, or a run of other letters and digits. "2024年5月"
# is four words whichever way it is wrapped.
_WORD = re.compile(f"[{_UNSPACED}]+|[^\\W{_UNSPACED}]+")
# White space between two unspaced characters: a line break a wrapper put there, or a
# Korean space it may have put a break in instead. One character of look-behind, so the
# scan is linear.
_UNSPACED_GAP = re.compile(f"(?<=[{_UNSPACED}])\\s+(?=[{_UNSPACED}])")
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]")
# Comments, and script, style and title elements, up to their end or the end of the text.
_HIDDEN = re.compile(r"<!--.*?(?:-->|\Z)|<(script|style|title)\b[^<>]*>.*?(?:</\1\s*>|\Z)",
                     re.IGNORECASE | re.DOTALL)
# A tag, or a declaration (<!DOCTYPE ...>, <?xml ...?>). No '<' inside, so a scan for its end
# stops at the next one; and the name and what follows it cannot both match the same
# characters, so a failed match backtracks in linear time (no quadratic rescans).
_TAG = re.compile(r"<(?:(/?)([A-Za-z][\w:-]*)([\s/][^<>]*)?|[!?][^<>]*)>")
_SPELLED_OUT = re.compile(
    r"""\b(?:href|src|alt|title)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>]+))""", re.IGNORECASE)
_BREAKS = frozenset({
    "address", "article", "blockquote", "br", "dd", "div", "dl", "dt", "footer", "h1", "h2",
    "h3", "h4", "h5", "h6", "header", "hr", "img", "li", "ol", "p", "pre", "section", "table",
    "td", "th", "tr", "ul"})
"""Tags that separate words; any other tag (``b``, ``span``, ``a``) may sit inside one."""
# Python's own codecs that no mailer declares and whose decoders are not linear-time safe
# or turn bytes into something other than the text (punycode inserts one character per
# step into a list).
_UNDECLARED_CODECS = frozenset({"punycode", "idna", "unicode-escape", "raw-unicode-escape"})


@dataclass(frozen=True, slots=True)
class RepeatedPart:
    """A text part whose words the body already holds."""

    media_type: str
    """Its declared type (``text/plain`` or ``text/html``)."""
    size: int
    """Its decoded size in bytes."""
    words: int
    """Distinct words compared."""
    found: int
    """How many of them the body holds."""
    in_order: bool
    """True when it was judged by order (fewer than `FEW_WORDS` distinct words)."""

    def describe(self) -> str:
        """``text/plain, 412 bytes, 57 of 58 words in the body``."""
        if not self.in_order:
            how = f"{self.found} of {self.words} words in the body"
        elif self.words == 1:
            how = "its one word in the body"
        else:
            how = f"its {self.words} words in the body, in the same order"
        return f"{self.media_type}, {self.size} bytes, {how}"


@dataclass(frozen=True, slots=True)
class Overlap:
    """How far a part's words and the body's hold each other's."""

    words: int
    """The part's distinct words."""
    found: int
    """How many of them the body holds (its visible words and what its tags spell out)."""
    body_words: int
    """The body's distinct visible words."""
    covered: int
    """How many of them the part holds (its words and what its tags spell out)."""
    in_order: bool
    """A part of fewer than `FEW_WORDS` distinct words, all in the body: whether they are
    there in the same order, one after another. False for any other part."""

    @property
    def held(self) -> bool:
        """The body already says what the part says, however little of the body that is:
        `DUPLICATE_SHARE` of its words there, or, under `FEW_WORDS`, all of them in order."""
        if not self.words:
            return False
        if self.words < FEW_WORDS:
            return self.in_order
        return self.found >= DUPLICATE_SHARE * self.words

    @property
    def repeats(self) -> bool:
        """The rule: the part says the body again, so it is not a file of its own: `held`,
        and it covers `COVER_SHARE` of the body (a list footer a reply quotes does not)."""
        return self.covered >= COVER_SHARE * self.body_words and self.held


class BodyWords:
    """The body's words, collected on first need, and the comparison budget left.

    Examples:
        >>> from email.message import EmailMessage
        >>> body, plain = EmailMessage(), EmailMessage()
        >>> body.set_content("<p>Board meets <b>Monday</b> at <a href='https://x.test/m'>nine</a>"
        ...                  " in the north berth office.</p>", subtype="html")
        >>> plain.set_content("Board meets Monday at nine <https://x.test/m>\\n"
        ...                   "in the north berth office.")
        >>> BodyWords(body).repeat(plain).describe()
        'text/plain, 73 bytes, 14 of 14 words in the body'
    """

    def __init__(self, body: Message) -> None:
        self._body = body
        self._read = False
        self._words: frozenset[str] = frozenset()
        """The body's distinct visible words."""
        self._reference: frozenset[str] = frozenset()
        """Those and what its tags spell out: what a part's words are looked up in."""
        self._sequence = ""
        self._budget = BUDGET_BYTES

    def repeat(self, part: Message) -> RepeatedPart | None:
        """The `RepeatedPart` for `part` when the body already says what it says, else None."""
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or len(data) > COMPARED_BYTES or self._budget <= 0:
            return None  # what is not read cannot be known to repeat anything
        self._budget -= len(data)
        overlap = self.overlap(part, data)
        if not overlap.repeats:
            return None
        return RepeatedPart(part.get_content_type(), len(data), overlap.words, overlap.found,
                            overlap.in_order)

    def overlap(self, part: Message, data: bytes) -> Overlap:
        """How far `part`'s words (decoded from `data`) and the body's hold each other's.

        Time in proportion to the part: the body's words are read once, and
        its words in the part are counted over the part's own words (the
        intersection is the same from either side).
        """
        tokens, spelled = part_words(data, part)
        return self._compare(tokens, spelled, covering=True)

    def compare_text(self, text: str) -> Overlap | None:
        """How far the body holds the words of `text` (an invitation's description, which
        Outlook copies from the body); None once the message's budget is spent.

        `Overlap.in_order` is computed for a text of fewer than `FEW_WORDS` words whose
        words are all in the body, however little of the body it covers.
        """
        if self._budget <= 0:
            return None
        self._budget -= len(text)
        return self._compare(words(text), frozenset(), covering=False)

    def _compare(self, tokens: list[str], spelled: frozenset[str], *,
                 covering: bool) -> Overlap:
        distinct = set(tokens)
        self._read_body()
        found = sum(1 for word in distinct if word in self._reference)
        covered = sum(1 for word in distinct | spelled if word in self._words)
        in_order = False
        if (0 < len(distinct) < FEW_WORDS and found == len(distinct)
                and (not covering or covered >= COVER_SHARE * len(self._words))):
            self._budget -= len(self._sequence)
            in_order = f" {' '.join(tokens)} " in self._sequence
        return Overlap(len(distinct), found, len(self._words), covered, in_order)

    def _read_body(self) -> None:
        if self._read:
            return
        self._read = True
        data = self._body.get_payload(decode=True)
        tokens, spelled = part_words(data[:COMPARED_BYTES] if isinstance(data, bytes) else b"",
                                     self._body)
        self._sequence = f" {' '.join(tokens)} "
        self._words = frozenset(tokens)
        self._reference = self._words | spelled


def part_words(data: bytes, part: Message) -> tuple[list[str], frozenset[str]]:
    """The part's visible words in order, and the words its HTML tags spell out."""
    text = declared_text(data, part)
    spelled = ""
    if part.get_content_type() == "text/html":
        text, spelled = _html_text(text)
    return words(text), frozenset(words(spelled)) if spelled else frozenset()


def words(text: str) -> list[str]:
    """`text`'s words in order, case-folded; a run of unspaced script as its character pairs.

    Examples:
        >>> words("Berth review: 会议改到\\n星期四 (Q3)")
        ['berth', 'review', '会议', '议改', '改到', '到星', '星期', '期四', 'q3']
        >>> words("회의는 목\\n요일에")
        ['회의', '의는', '는목', '목요', '요일', '일에']
    """
    found: list[str] = []
    text = text.casefold()
    if _UNSPACED_RUN.search(text):
        text = _UNSPACED_GAP.sub("", text)
    for run in _WORD.findall(text):
        if len(run) > 1 and _UNSPACED_RUN.match(run):
            found.extend(run[i:i + 2] for i in range(len(run) - 1))
        else:
            found.append(run)
    return found


def declared_text(data: bytes, part: Message) -> str:
    """`data` decoded in the charset `part` declares; UTF-8 when it names none, or one
    Python lacks, or one of Python's own codecs no mailer declares."""
    charset = part.get_content_charset() or "utf-8"
    try:
        if codecs.lookup(charset).name in _UNDECLARED_CODECS:
            charset = "utf-8"
        return data.decode(charset, "replace")
    except (LookupError, UnicodeError):  # unknown, or a codec that refuses to decode at all
        return data.decode("utf-8", "replace")


def _html_text(markup: str) -> tuple[str, str]:
    """Visible text of HTML, and its tags' link targets, sources and alternative texts; in
    time linear in its length."""
    markup = _HIDDEN.sub(" ", markup)
    pieces: list[str] = []
    spelled: list[str] = []
    last = 0
    for tag in _TAG.finditer(markup):
        pieces.append(markup[last:tag.start()])
        if (tag.group(2) or "").lower() in _BREAKS:
            pieces.append("\n")
        if tag.group(3) and not tag.group(1):
            spelled.extend("".join(groups) for groups in _SPELLED_OUT.findall(tag.group(3)))
        last = tag.end()
    pieces.append(markup[last:])
    return html.unescape("".join(pieces)), html.unescape(" ".join(spelled))
