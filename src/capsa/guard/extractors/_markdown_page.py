"""The page markdown-it renders for a Markdown source, each piece knowing its source.

`hidden_spans` is the working half of `visible_markdown`: it parses with the
tracking parser (`_markdown_source`), rebuilds the HTML markdown-it renders
piece by piece, runs the HTML tokenizer pass over it (`_html_hiding`), and
maps each hidden stretch back to the source.
"""

from __future__ import annotations

import bisect

from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token

from capsa.guard.extractors._html_hiding import hidden_ranges
from capsa.guard.extractors._markdown_source import (
    MappingFailed,
    SourceMap,
    Tracker,
    tracking_parser,
)

__all__ = ["hidden_spans"]


def hidden_spans(source: str) -> list[tuple[int, int, str]]:
    """The stretches of `source` (``\\n`` line ends) a rendered page hides, in order and
    apart: ``(start, end, what)``, `what` as in `HiddenRange`."""
    page = _Page(source)
    spans: list[tuple[int, int, str]] = []
    for hidden in hidden_ranges(page.html, page.reaches_text):
        start = page.source_start(hidden.start)
        end = page.source_end(hidden.end)
        if spans and start < spans[-1][1]:  # never expected: the pieces are in order
            raise MappingFailed("hidden stretches overlap in the source")
        spans.append((start, max(start, end), hidden.what))
    return spans


class _Page:
    """The HTML markdown-it renders for a source, in pieces that know their source.

    Three kinds of piece: raw HTML (``html_block``, ``html_inline``), mapped
    character by character; escaped text and code, mapped by where they start
    and end; and markup markdown-it generates (tags, line breaks, attributes
    made from link destinations and image descriptions), mapped to nothing.
    """

    _MD = tracking_parser()

    def __init__(self, source: str) -> None:
        self.source = source
        self._parts: list[str] = []
        self._offsets: list[int] = []
        """Where each piece starts in the page."""
        self._raw: list[SourceMap | None] = []
        """Each raw piece's map; None for the others."""
        self._ends: list[int] = []
        """For each piece, the furthest source offset any text or raw piece up to and
        including it reaches."""
        self._size = 0
        tracker = Tracker()
        tokens = self._MD.parse(source, {"capsa_tracker": tracker})
        self._render(tokens, tracker, {"capsa_tracker": tracker})
        self.html = "".join(self._parts)

    # -- building -------------------------------------------------------------------------

    def _add(self, html: str, raw: SourceMap | None = None,
             span: tuple[int, int] | None = None) -> None:
        if not html:
            return
        reach = self._ends[-1] if self._ends else 0
        if raw is not None:
            span = (raw.source(0), raw.source(raw.length))
        if span is not None:
            reach = max(reach, span[1])
        self._offsets.append(self._size)
        self._parts.append(html)
        self._raw.append(raw)
        self._ends.append(reach)
        self._size += len(html)

    def _render(self, tokens: list[Token], tracker: Tracker, env: dict[str, Tracker]) -> None:
        renderer, options = self._renderer(), self._MD.options
        for index, token in enumerate(tokens):
            if token.type == "inline":
                self._inline(token, tracker, env)
            elif token.type == "html_block":
                self._add(token.content, raw=_map_of(tracker, token))
            elif token.type in ("fence", "code_block"):
                found = _map_of(tracker, token)
                html = renderer.rules[token.type](tokens, index, options, env)
                self._code(html, token.content, (found.source(0), found.source(found.length)))
            elif token.type in renderer.rules:
                self._add(renderer.rules[token.type](tokens, index, options, env))
            else:
                self._add(renderer.renderToken(tokens, index, options, env))

    def _renderer(self) -> RendererHTML:
        renderer = self._MD.renderer
        if not isinstance(renderer, RendererHTML):
            raise MappingFailed("the tracking parser renders with markdown-it's HTML renderer")
        return renderer

    def _inline(self, inline: Token, tracker: Tracker, env: dict[str, Tracker]) -> None:
        renderer, options = self._renderer(), self._MD.options
        whole = _map_of(tracker, inline)
        children = inline.children or []
        for index, child in enumerate(children):
            kind = child.type
            if kind in ("text", "text_special", "code_inline", "html_inline"):
                start, end = tracker.spans.get(id(child), (-1, -1))
                if start < 0:
                    raise MappingFailed(f"an inline {kind} token has no recorded span")
                if kind == "html_inline":
                    if inline.content[start:end] != child.content:
                        raise MappingFailed("inline HTML is not where its rule read it")
                    self._add(child.content, raw=whole.shifted(start, end - start))
                    continue
                span = (whole.source(start), whole.source(end))
                if kind == "code_inline":
                    self._code(renderer.rules["code_inline"](children, index, options, env),
                               child.content, span)
                else:
                    self._add(escapeHtml(child.content), span=span)
                continue
            if kind == "image":  # its description renders as text in `alt`
                _join_escapes(child)
            if kind in renderer.rules:
                self._add(renderer.rules[kind](children, index, options, env))
            else:
                self._add(renderer.renderToken(children, index, options, env))

    def _code(self, html: str, content: str, span: tuple[int, int]) -> None:
        """Code as the renderer wrote it: its tags as markup, its escaped text as text."""
        escaped = escapeHtml(content)
        close = html.rindex("</code>")
        if html[close - len(escaped):close] != escaped:
            raise MappingFailed("code renders differently from its content")
        self._add(html[:close - len(escaped)])
        self._add(escaped, span=span)
        self._add(html[close:])

    # -- reading --------------------------------------------------------------------------

    def _piece(self, offset: int) -> int:
        return bisect.bisect_right(self._offsets, offset) - 1

    def reaches_text(self, start: int, end: int) -> bool:
        """Whether page offsets `start` to `end` run past the piece `start` is in."""
        piece = self._piece(start)
        return end > self._offsets[piece] + len(self._parts[piece])

    def source_start(self, offset: int) -> int:
        """The source offset of the ``<`` at page `offset`; it is always raw HTML."""
        piece = self._piece(offset)
        raw = self._raw[piece]
        if raw is None:
            raise MappingFailed("a hidden stretch starts outside raw HTML")
        found = raw.source(offset - self._offsets[piece])
        if self.source[found:found + 1] != self.html[offset]:
            raise MappingFailed("a hidden stretch's start maps to another character")
        return found

    def source_end(self, offset: int) -> int:
        """The source offset a hidden stretch ending at page `offset` ends at."""
        if offset >= self._size:
            return len(self.source)
        piece = self._piece(offset - 1)
        raw = self._raw[piece]
        if raw is None:  # in generated markup: after the last source text before it
            return self._ends[piece]
        found = raw.source(offset - 1 - self._offsets[piece])
        if self.source[found:found + 1] != self.html[offset - 1]:
            raise MappingFailed("a hidden stretch's end maps to another character")
        return found + 1


def _map_of(tracker: Tracker, token: Token) -> SourceMap:
    found = tracker.maps.get(id(token))
    if found is None:
        raise MappingFailed(f"a {token.type} token has no recorded source map")
    return found


def _join_escapes(image: Token) -> None:
    """Escapes in an image's description read as text (markdown-it's ``text_join``,
    left off in the tracking parse)."""
    for child in image.children or []:
        if child.type == "text_special":
            child.type = "text"
        if child.type == "image":
            _join_escapes(child)
