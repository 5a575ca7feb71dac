"""Sentence segmentation with character offsets into the original text.

Compression keeps and drops whole sentences, and receipts cite the kept ones
by offset, so the splitter returns spans, never copies. It is rule-based and
deterministic: no model, no download. The rules cover what retrieved text
actually contains:

- prose: a boundary after ``.``, ``!``, ``?`` or ``…`` (and any closing quotes or
  brackets) followed by whitespace, except after a known abbreviation
  (``Dr.``, ``e.g.``, ``U.S.``), a single-letter initial (``John F. Kennedy``) or
  ``No.`` before a number; decimals (``3.14``) never split;
- CJK full stops (``。！？``) end a sentence without any whitespace after them;
- a sentence over 300 characters is split after its semicolons, colons and
  commas, into clauses of 40 characters or more: legal and technical prose
  chains clauses into sentences no tight budget can keep whole, often with
  no semicolon at all ("..., or (ii) ownership of fifty percent (50%) or
  more ..."); a clause still longer (a transcript or scraped text with no
  punctuation, compact JSON) is cut at word breaks into pieces of at most 300
  characters, so the piece that matches can be kept alone;
- a blank line always ends a unit; a single newline does too before a list
  item, heading or table row, or after a line that ends a sentence, but not
  inside hard-wrapped prose;
- a fenced code block (three backticks or tildes) is one unit;
- a unit longer than `MAX_UNIT_CHARS` (a table, a minified blob, a long code
  block) is cut at line or word boundaries, so no single unit is unpackable.
"""

from __future__ import annotations

import re

__all__ = ["MAX_UNIT_CHARS", "split_sentences"]

MAX_UNIT_CHARS = 1200
"""Longest unit the splitter returns; longer stretches are cut at line or word breaks."""
_LONG_SENTENCE = 300
"""Characters (about 75 tokens) above which a sentence is split into its clauses."""
_SHORTEST_CLAUSE = 40
"""Fewest characters a clause split off a long sentence may have."""
_LONGEST_CLAUSE = _LONG_SENTENCE
"""Longest clause of a long sentence; a longer one (a transcript or scraped text with
no punctuation, compact JSON) is cut at word breaks."""
_CLAUSE_END = re.compile(r"[;:,](?=\s)")

_FENCE_OPEN = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n", re.MULTILINE)
_FENCE_CLOSE = {kind: re.compile(rf"^[ \t]*{kind}[ \t]*$", re.MULTILINE) for kind in ("```", "~~~")}
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
_LINE_START = re.compile(r"[ \t]*(?:[-*+•▪‣◦]\s|\d{1,3}[.)]\s|#{1,6}\s|\|)")
_END = re.compile(r"[.!?…。！？](?:(?<=[.!?…])(?<![.!?…][.!?…])[.!?…]*+[\"'’”)\]]*+(?=\s)"
                  r"|(?<=[。！？])[。！？]*+[」』）\"”]*+)")
"""A sentence's end: a run of stops (its closing quotes and brackets after it) before
whitespace, or a CJK full stop. A match starts only where a run starts, and never gives
back what it read: tried at every position of a long run (``.!?.!?…``, dot leaders, OCR
noise), the search cost the square of the run's length, 250,000 stops ten minutes.
The pattern opens with one class of every stop, and says where the run starts only
after it: the engine then skips to the next stop in one scan, where a leading
lookbehind had it try the whole pattern at every character (eight times slower)."""
_INVISIBLE = (
    r"\x00-\x20\x7f-\xa0\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u1680\u180e"
    r"\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ufeff\ufff9-\ufffb\U000110bd"
    r"\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    r"\U000e0020-\U000e007f"
)
"""Whitespace, control and format characters (Unicode 14, Python 3.11's tables; a test
derives the same ranges from `unicodedata`)."""
_VISIBLE = re.compile(f"[^{_INVISIBLE}]")
"""Any character that shows: not whitespace, a control or a format character. A stretch of
zero-width spaces, joiners, byte-order marks or NULs is no sentence, so a passage of only
those is empty, like one of only spaces."""
_NEXT_START = re.compile(r"\s+([\"'“‘(\[]*[A-Z0-9À-ÖØ-Þ\u0370-\u03ff\u0400-\u04ff]|[^\x00-\x7f])")
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "vs", "etc", "cf", "al", "fig",
    "figs", "vol", "vols", "ed", "eds", "dept", "est", "approx", "inc", "ltd", "co", "corp", "plc",
    "llc", "bros", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov",
    "dec", "gen", "gov", "sen", "rep", "lt", "col", "capt", "sgt", "rev", "hon", "pres", "adm",
    "cmdr", "maj", "messrs", "mme", "mlle",
})


def split_sentences(text: str) -> tuple[tuple[int, int], ...]:
    """Split `text` into sentence-like units, returned as ``(start, end)`` offsets.

    Each span is stripped of surrounding whitespace, spans are in order and
    never overlap, and together they cover every non-whitespace character of
    `text`, so ``"".join`` of the spans' text plus the whitespace between them
    is the original. Compression ranks these units; receipts report them.

    Args:
        text: any text: prose, lists, Markdown, code, CJK.

    Returns:
        The spans, empty for an empty or all-whitespace text.

    Examples:
        >>> text = "Dr. Ng paid EUR 3.50 for it. Then she left."
        >>> [text[s:e] for s, e in split_sentences(text)]
        ['Dr. Ng paid EUR 3.50 for it.', 'Then she left.']
    """
    spans: list[tuple[int, int]] = []
    cursor = 0
    for start, end in _fences(text):
        _split_prose_blocks(text, cursor, start, spans)
        _add_capped(text, start, end, spans, by_line=True)
        cursor = end
    _split_prose_blocks(text, cursor, len(text), spans)
    return tuple(spans)


def _fences(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks as ``(start, end)``, found in one pass over the text.

    An opening fence line is looked for only where one can start, and its
    closing line with a plain search from there; a fence that never closes
    ends the search, so the cost stays linear in the text's length.
    """
    if "```" not in text and "~~~" not in text:
        return []
    found: list[tuple[int, int]] = []
    position = 0
    unclosed: set[str] = set()  # a kind with no closing line left: none of it can close later
    while True:
        opening = _FENCE_OPEN.search(text, position)
        if opening is None:
            return found
        kind = opening.group(1)
        position = opening.end()
        if kind in unclosed:
            continue
        close = _FENCE_CLOSE[kind].search(text, opening.end())
        if close is None:
            unclosed.add(kind)
            continue
        found.append((opening.start(), close.end()))
        position = close.end()


def _split_prose_blocks(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    block_start = start
    for blank in _BLANK_LINE.finditer(text, start, end):
        _split_lines(text, block_start, blank.start(), out)
        block_start = blank.end()
    _split_lines(text, block_start, end, out)


def _split_lines(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Group a block's lines into runs of prose, breaking at list items and the like."""
    run_start = start
    line_start = start
    while line_start < end:
        newline = text.find("\n", line_start, end)
        line_end = end if newline < 0 else newline
        next_start = line_end + 1
        if newline >= 0 and next_start < end and _breaks_after(text, line_start, line_end,
                                                                  next_start, end):
            _split_run(text, run_start, line_end, out)
            run_start = next_start
        line_start = next_start
    _split_run(text, run_start, end, out)


def _breaks_after(text: str, line_start: int, line_end: int, next_start: int, end: int) -> bool:
    line = text[line_start:line_end].rstrip()
    if not line:
        return True
    if "\t" in line or _LINE_START.match(text, line_start) or line.endswith((":", "|")):
        return True
    if line.endswith((".", "!", "?", "…", "。", "！", "？", '."', ".”")):
        return True
    if _LINE_START.match(text, next_start, end):
        return True
    next_end = text.find("\n", next_start, end)
    return "\t" in text[next_start:end if next_end < 0 else next_end]


def _split_run(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Split one run of prose at sentence ends."""
    sentence_start = start
    for match in _END.finditer(text, start, end):
        stop = match.end()
        if match.group()[0] in "。！？":
            if text[stop:end].strip():
                _add_capped(text, sentence_start, stop, out)
                sentence_start = stop
            continue
        follower = _NEXT_START.match(text, stop, end)
        if (follower is None or _is_abbreviation(text, sentence_start, match.start(), follower)
                or _aside_runs_on(text, follower.start(1), end)):
            continue
        _add_clauses(text, sentence_start, stop, out)
        sentence_start = stop
    _add_clauses(text, sentence_start, end, out)


def _add_clauses(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Append a sentence, split after its semicolons, colons and commas when it is long.

    A sentence over `_LONG_SENTENCE` characters (legal and technical prose
    chains clauses that way) costs more than a tight budget can give one
    sentence. A clause split off at a comma may not stand alone, but kept
    beside its neighbours it reads as the sentence did, and at a tight budget
    the clause that answers beats a sentence cut before the answer (see
    `capsa.budget.compress`). A clause shorter than `_SHORTEST_CLAUSE` stays
    with its neighbour, so short list items are not split one by one.
    """
    if end - start <= _LONG_SENTENCE:
        _add_capped(text, start, end, out)
        return
    piece = start
    for match in _CLAUSE_END.finditer(text, start, end):
        stop = match.end()
        if stop - piece >= _SHORTEST_CLAUSE and end - stop >= _SHORTEST_CLAUSE:
            _add_capped(text, piece, stop, out, cap=_LONGEST_CLAUSE)
            piece = stop
    _add_capped(text, piece, end, out, cap=_LONGEST_CLAUSE)


_ASIDE = re.compile(r"[(\[][^()\[\]\n.!?]{0,120}[)\]]\s+[a-z]")
"""A bracketed aside with no stop inside it, then a lower-case word: the middle of a sentence."""


def _aside_runs_on(text: str, at: int, end: int) -> bool:
    """Whether what follows a stop is a bracketed aside the same sentence runs on after.

    "Rear Adm. J. Edward Snyder, USN (Ret.)  (October 23, 1924 – November 4,
    2007) was notable as the captain": a bracket after a stop reads as a new
    sentence's opening, but a sentence does not go on in lower case after a
    closing bracket, so the stop was an abbreviation's (here one that
    `_ABBREVIATIONS` does not list). An aside that is a sentence of its own
    ("(This is an aside.)") holds its stop and is left alone.

    Examples:
        >>> [t[a:b] for t in ["He retired (Ret.) (in 1990) and died."]
        ...  for a, b in split_sentences(t)]
        ['He retired (Ret.) (in 1990) and died.']
    """
    return _ASIDE.match(text, at, end) is not None


def _is_abbreviation(text: str, start: int, dot: int, follower: re.Match[str]) -> bool:
    if text[dot] != ".":
        return False
    word_start = dot
    while word_start > start and not text[word_start - 1].isspace() and text[word_start - 1] != "(":
        word_start -= 1
    word = text[word_start:dot].lstrip("\"'“‘([")
    lowered = word.lower()
    if not word:
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():
        return True  # an initial: "John F. Kennedy"
    if "." in word and all(len(part) <= 2 for part in word.split(".")):
        return True  # "e.g.", "U.S.", "Ph.D"
    if lowered == "no":
        return follower.group(1)[-1].isdigit()
    if word.isdigit() and word_start == start:
        return True  # a numbered list item, "1. First"
    return lowered in _ABBREVIATIONS


def _add_capped(
    text: str, start: int, end: int, out: list[tuple[int, int]], *, by_line: bool = False,
    cap: int = MAX_UNIT_CHARS,
) -> None:
    """Append the stripped span, cut into pieces of at most `cap` characters."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    while end - start > cap:
        limit = start + cap
        cut = text.rfind("\n", start + 1, limit) if by_line else -1
        if cut <= start:
            cut = max(text.rfind(" ", start + 1, limit), text.rfind("\n", start + 1, limit))
        if cut <= start:
            cut = limit
        _add_capped(text, start, cut, out, cap=cap)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start and _VISIBLE.search(text, start, end):
        out.append((start, end))
