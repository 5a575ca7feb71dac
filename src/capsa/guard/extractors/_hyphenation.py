"""Words a page's layout broke at a line end, joined again.

A PDF's text layer and OCR give the lines a typesetter set, so a word the
typesetter hyphenated to justify a line comes out in two pieces:
``Funda-\\nmentalgruppe``. A reader sees one word; a search for it, capsa's
scorer and a retriever's tokenizer see two fragments that match nothing. So
the pieces are joined where the second begins in lower case. A compound that
breaks at its own hyphen (``well-\\nknown``) must keep it, and only the
document can say which it is: the hyphen is kept when the document spells the
word with it elsewhere, or when the piece before the break is a compound
already (``state-of-the-\\nart``); otherwise the break is a typesetter's and
goes, as most are (pdflatex, LibreOffice and Word hyphenate, while compounds
split at their hyphen are few). A soft hyphen (U+00AD) is a typesetter's by
definition. A capital after the break (``Schwarz-\\nWeiß``), a digit, or a
blank line between the lines is left as it is.

The line break moves to after the joined word, so lines stay lines. Only
page text from a layout (PDF text layers, OCR) passes here: in a Word or
HTML document a line end is the author's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Joined", "hyphenation_notes", "join_hyphenated", "joinable_hyphens"]

_BREAK = re.compile(
    r"(?<![\w\-\u2010])(?P<head>[\w\-\u2010]*[^\W\d_])(?P<mark>[-\u00ad\u2010])[ \t]*\n[ \t]*"
    r"(?P<tail>[^\W\d_]\w*)(?P<rest>\S*)(?P<gap>[ \t]+|(?=\s)|\Z)")
"""A word piece ending in a hyphen at a line end, then the next line's first word and
whatever clings to it (punctuation, a further piece), then the space after it."""
_WORD = re.compile(r"[\w\-\u2010]+")
_HYPHENS = "-\u2010"
_PASSES = 4
"""A word broken over more than two lines (a very narrow column) takes a pass per break."""


class Joined(NamedTuple):
    """The pages with their broken words joined, and how many of each kind."""

    pages: list[str]
    joined: int
    """Breaks removed: the pieces became one word."""
    kept: int
    """Breaks at a compound's own hyphen: the line end went, the hyphen stayed."""


def join_hyphenated(pages: Sequence[str]) -> Joined:
    """Join the words `pages` break at line ends, deciding each hyphen by the whole document.

    Examples:
        >>> mended = join_hyphenated(["a funda-\\nmental group, well-known\\nand well-\\nknown"])
        >>> mended.pages
        ['a fundamental\\ngroup, well-known\\nand well-known']
        >>> mended.joined, mended.kept
        (1, 1)
    """
    if not any("\n" in page and any(mark in page for mark in "-\u00ad\u2010")
               for page in pages):
        return Joined(list(pages), 0, 0)
    spelt = Counter(word.strip(_HYPHENS) for page in pages for word in _WORD.findall(page.lower()))
    counts = [0, 0]

    def mend(match: re.Match[str]) -> str:
        head, mark, tail = match["head"], match["mark"], match["tail"]
        if not tail[0].islower():
            return match[0]
        whole, hyphened = (head + tail).lower(), f"{head}-{tail}".lower()
        keep = mark != "\u00ad" and (
            spelt[hyphened] > spelt[whole]
            or (not spelt[whole] and any(hyphen in head for hyphen in _HYPHENS)))
        counts[keep] += 1
        line_end = "\n" if match["gap"] else ""
        return f"{head}{'-' if keep else ''}{tail}{match['rest']}{line_end}"

    mended = []
    for page in pages:
        for _ in range(_PASSES):
            before, page = page, _BREAK.sub(mend, page)
            if page == before:
                break
        mended.append(page)
    return Joined(mended, counts[0], counts[1])


def hyphenation_notes(mended: Joined) -> tuple[str, ...]:
    """What `join_hyphenated` changed, for the result's notes; nothing when it changed nothing."""
    if not mended.joined and not mended.kept:
        return ()
    return (f"joined {mended.joined + mended.kept} word(s) the layout hyphenated at a line end "
            f"({mended.kept} keeping a hyphen the document spells them with)",)


_LINE_END_HYPHEN = re.compile(r"[-\u2010][ \t]*\n")


def joinable_hyphens(page: str) -> int:
    """How many hyphens `join_hyphenated` could take out of `page`: at most one for each
    hyphen at a line end. A floor counted before the join subtracts them, so that it never
    refuses a page whose joined text fits."""
    return len(_LINE_END_HYPHEN.findall(page))
