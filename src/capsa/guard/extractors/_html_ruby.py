"""HTML phonetic guides (``<ruby>``) read as a word, then its reading.

Japanese pages write furigana over kanji, Chinese ones pinyin or zhuyin, as
``<ruby>``: the base text, each reading in an ``<rt>`` drawn above it. A page
may add ``<rp>`` parentheses for browsers that cannot draw ruby, and many
set one ``<rt>`` per character. unstructured reads the tree's text in
order, so ``<ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>`` read as "漢かん字じ":
the word a search types, 漢字, was gone, and so was the reading as one word.

`spell_out_ruby` writes each guide as its whole base, then its readings in
parentheses, ``漢字(かんじ)``: what a page with ``<rp>`` shows a browser
without ruby, and what a Word document's guide reads as
(`capsa.guard.extractors._docx_glyphs`). Runs after the hidden elements are
taken out, so a hidden reading stays out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["spell_out_ruby"]

_ANNOTATIONS = frozenset({"rt", "rtc"})
_SKIPPED = _ANNOTATIONS | {"rp"}


def spell_out_ruby(root: Any) -> int:
    """Write each ``<ruby>`` under `root` as its base text, then its readings in
    parentheses; returns how many were written."""
    if root is None:
        return 0
    guides = [ruby for ruby in root.iter("ruby")
              if next(ruby.iterancestors("ruby"), None) is None]  # an inner one goes with it
    for ruby in guides:
        base = "".join(_base(ruby))
        reading = "".join(text for annotation in ruby.iter(*_ANNOTATIONS)
                          if next(annotation.iterancestors(*_ANNOTATIONS), None) is None
                          for text in annotation.itertext())
        for child in list(ruby):
            ruby.remove(child)  # its tail goes with it: the base was read above
        ruby.text = f"{base}({reading})" if reading.strip() else base
    return len(guides)


def _base(element: Any) -> list[str]:
    """The text of `element` outside its readings and their parentheses."""
    found = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and child.tag not in _SKIPPED:
            found.extend(_base(child))
        found.append(child.tail or "")
    return found
