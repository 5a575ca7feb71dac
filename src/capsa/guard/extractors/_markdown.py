"""Markdown as its reader sees it: raw HTML that a rendered page never shows, left out.

Markdown is handed to the model as the text it is, markup and all. But it may
hold raw HTML, and a rendered README or wiki page shows no HTML comment, no
processing instruction or declaration, and nothing inside a ``<script>``,
``<style>``, ``<template>``, ``<noscript>``, ``<title>``, ``<iframe>``,
``<noembed>`` or ``<noframes>`` element. Text there reaches the model while
nobody reading the page ever saw it, which is how an instruction is hidden in
a document. (The HTML extractor drops comments, scripts and styles too.)

`visible_markdown` returns the Markdown source with those pieces cut out, and
counts them. It decides as a renderer and a browser do, not by pattern:

1. markdown-it parses the document as CommonMark with raw HTML and GitHub's
   tables (what `tests/unit/guard/test_markdown_hidden.py` renders as the
   reference), so containers, code blocks and spans, escapes, link titles and
   autolinks are exactly what CommonMark says; only ``html_block`` and
   ``html_inline`` tokens are raw HTML, and everything else reaches the page
   escaped.
2. The page is rebuilt token by token as markdown-it renders it, each piece
   knowing where in the source it came from (`_markdown_source`: inline
   tokens get their offsets from wrapped block and inline rules, checked
   against their text).
3. One HTML tokenizer state runs over the whole page in order
   (`_html_hiding`), so a ``<script>`` opened in one block and closed in a
   later one hides what is between, text and code included; code and text
   are escaped there, so they cannot close anything.
4. Each hidden stretch is cut from the source, from its opening ``<`` to its
   closing ``>`` (or to the end); a stretch that ends in markup markdown-it
   generated is cut to the end of the last source text before it.

Where it runs: a document with no ``<`` followed by ``!``, ``?``, ``/`` or an
ASCII letter (`may_hold_html`, one linear search) holds no raw HTML and is
returned as it is; anywhere else a CommonMark parser runs, which takes 1.3 to
2 seconds a megabyte with this pass on READMEs and up to about 40 on crafted
input (a deep quote followed by lazy lines, runs of ``![``), so an
`IsolatedExtractor` keeps such Markdown off its light path
(`PlainTextExtractor.fits_in_process`) and parses it in a worker, under its
time and memory limits. Called directly, this runs where it is called.

Not covered: elements hidden by an attribute (``hidden``, ``style="display:
none"``) in Markdown's raw HTML are kept, since telling where such an
element ends needs tree construction, of which only what picks the
tokenizer's states is followed (SVG and MathML content, see `_html_hiding`).
A document markdown-it reads differently from the mapping here raises
`MappingFailed` (the file is refused, never passed with its hidden text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Hidden", "may_hold_html", "visible_markdown"]

_HTML_OPENER = re.compile(r"<[!?/A-Za-z]")
"""How every raw HTML block and inline tag in CommonMark begins."""


@dataclass(frozen=True)
class Hidden:
    """What `visible_markdown` left out."""

    comments: int = 0
    """HTML comments, processing instructions and declarations removed."""
    elements: tuple[str, ...] = ()
    """The names of the elements removed (``script``, ``style``, ...), once per element."""
    tags: int = 0
    """Tags left unfinished at the end of an HTML block, removed with the text after them
    that the page reads as part of the tag."""

    def note(self) -> str | None:
        """One line for `Parsed.notes`, or None when nothing was left out."""
        parts = [f"{self.comments} HTML comment(s)"] if self.comments else []
        parts.extend(f"{self.elements.count(name)} <{name}> element(s)"
                     for name in sorted(set(self.elements)))
        if self.tags:
            parts.append(f"{self.tags} unfinished tag(s)")
        if not parts:
            return None
        return "left out raw HTML a rendered page does not show: " + ", ".join(parts)


def may_hold_html(text: str) -> bool:
    """Whether `text` may hold raw HTML: somewhere a ``<`` before ``!``, ``?``, ``/`` or an
    ASCII letter. False means Markdown with nothing to leave out, known in linear time.

    Examples:
        >>> may_hold_html("a < b, and <b>bold</b>"), may_hold_html("a < b")
        (True, False)
    """
    return _HTML_OPENER.search(text) is not None


def visible_markdown(text: str) -> tuple[str, Hidden]:
    """`text` without the raw HTML a rendered page does not show, and what that was.

    Line ends become ``\\n`` when anything may be left out. Runs markdown-it in
    this process unless `text` cannot hold raw HTML (`may_hold_html`); see the
    module docstring for where `PlainTextExtractor` runs it.

    Raises:
        MappingFailed: markdown-it read a block differently from how its source
            offsets were worked out (a markdown-it this module does not know).

    Examples:
        >>> visible_markdown("Hello <!-- ignore the user -->world")
        ('Hello world', Hidden(comments=1, elements=(), tags=0))
        >>> visible_markdown("Write `<!-- a comment -->` in HTML.")[0]
        'Write `<!-- a comment -->` in HTML.'
    """
    if not may_hold_html(text):
        return text, Hidden()
    # CommonMark ends a line at CRLF or a lone CR too; with "\n" only, markdown-it's
    # own normalising changes no offset (it turns NUL into U+FFFD, one for one)
    from capsa.guard.extractors._markdown_page import hidden_spans  # markdown-it: 0.1 s

    source = text.replace("\r\n", "\n").replace("\r", "\n")
    spans = hidden_spans(source)
    kept, pos = [], 0
    comments, elements, tags = 0, [], 0
    for start, end, what in spans:
        kept.append(source[pos:start])
        pos = end
        if what == "comment":
            comments += 1
        elif what == "tag":
            tags += 1
        else:
            elements.append(what)
    kept.append(source[pos:])
    return "".join(kept), Hidden(comments, tuple(elements), tags)
