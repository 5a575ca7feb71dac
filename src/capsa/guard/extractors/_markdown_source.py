"""Where each piece of a markdown-it parse stands in the Markdown source.

markdown-it gives block tokens the lines they cover (``map``) and inline
tokens none: an inline token's children are parsed from a string the block
rule built (container marks and indentation cut, lines joined, ends trimmed,
``\\|`` unescaped in table cells). `tracking_parser` returns a markdown-it
that records, as it parses, how that string maps back to the source and
where each child came from in it:

- every block rule is wrapped; right after one makes a paragraph, heading,
  table cell, HTML block or code block, the source is read again the way the
  rule read it, with the line marks of that moment (a quote or list changes
  them while it parses what it holds), and the result must equal the
  token's content character for character, or the parse fails;
- every inline rule is wrapped to record where it started and ended, and the
  inline state notes where its pending text began, so each text, code, escape
  and raw HTML token gets the span of the inline string it was made from.

Each recorded `SourceMap` and span is checked against the text it claims,
so a rule read differently from here raises instead of mapping wrong.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, MutableMapping
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import MD_TRIM_CHARS
from markdown_it.parser_inline import ParserInline
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

__all__ = ["MappingFailed", "SourceMap", "Tracker", "tracking_parser"]

_BLOCK_CONTENT = frozenset({"paragraph", "heading", "lheading", "table", "html_block", "code",
                            "fence"})
"""The block rules whose tokens carry source text."""


class MappingFailed(RuntimeError):
    """The text a token holds is not what reading the source as its rule did gives."""


class SourceMap:
    """Offsets in one token's content to offsets in the source.

    Built from runs: ``(content offset, source offset, length, synthetic)``,
    where a synthetic run is spaces a tab was expanded to, all mapped to the tab.
    """

    def __init__(self, runs: list[tuple[int, int, int, bool]], length: int) -> None:
        self._starts = [run[0] for run in runs]
        self._runs = runs
        self.length = length

    def source(self, offset: int) -> int:
        """The source offset of the content character at `offset` (its end at the length)."""
        if not self._runs:
            raise MappingFailed("an empty token has no source position")
        if offset >= self.length:
            start, source, length, synthetic = self._runs[-1]
            return source + (1 if synthetic else length)
        run = bisect.bisect_right(self._starts, offset) - 1
        start, source, length, synthetic = self._runs[run]
        return source if synthetic else source + offset - start

    def shifted(self, offset: int, length: int) -> SourceMap:
        """The map of ``content[offset:offset + length]``."""
        runs = []
        first = max(bisect.bisect_right(self._starts, offset) - 1, 0)
        last = bisect.bisect_right(self._starts, offset + length)  # only the runs it meets
        for start, source, run_length, synthetic in self._runs[first:last]:
            low, high = max(start, offset), min(start + run_length, offset + length)
            if low < high or (run_length == 0 and offset <= start <= offset + length):
                runs.append((low - offset, source if synthetic else source + low - start,
                             high - low, synthetic))
        if not runs:  # an empty cell or heading: where it would have started
            runs.append((0, self.source(offset), 0, False))
        return SourceMap(runs, length)


class Tracker:
    """What one tracked parse learnt: each token's source map or inline span."""

    def __init__(self) -> None:
        self.maps: dict[int, SourceMap] = {}
        """``id(token)`` of a block token holding text (inline, HTML, code) to its map."""
        self.spans: dict[int, tuple[int, int]] = {}
        """``id(token)`` of an inline child to its span in its inline token's content."""
        self.tokens: list[Token] = []
        """Every token given a map or span, kept alive so no id is reused."""


def tracker_of(env: MutableMapping[str, Any]) -> Tracker:
    tracker = env.get("capsa_tracker")
    if not isinstance(tracker, Tracker):
        raise MappingFailed("a tracked parse needs its Tracker in env['capsa_tracker']")
    return tracker


# -- block rules ------------------------------------------------------------------------


def _lines(state: StateBlock, begin: int, end: int, indent: int,
           keep_last_lf: bool) -> list[tuple[int, int, int, bool]]:
    """`StateBlock.getLines`, as runs of the source instead of a string."""
    runs: list[tuple[int, int, int, bool]] = []
    src, offset = state.src, 0
    for line in range(begin, end):
        line_indent = 0
        line_start = first = state.bMarks[line]
        last = state.eMarks[line] + 1 if line + 1 < end or keep_last_lf else state.eMarks[line]
        last = min(last, len(src))
        while first < last and line_indent < indent:
            char = src[first]
            if char == "\t":
                line_indent += 4 - (line_indent + state.bsCount[line]) % 4
            elif char == " " or first - line_start < state.tShift[line]:
                line_indent += 1
            else:
                break
            first += 1
        if line_indent > indent:
            runs.append((offset, first - 1, line_indent - indent, True))
            offset += line_indent - indent
        if last > first:
            runs.append((offset, first, last - first, False))
            offset += last - first
    return runs


def _text_of(src: str, runs: list[tuple[int, int, int, bool]]) -> str:
    return "".join(" " * length if synthetic else src[source:source + length]
                   for _, source, length, synthetic in runs)


def _trimmed(src: str, runs: list[tuple[int, int, int, bool]], content: str, *,
             whole: bool = True) -> SourceMap:
    """The map of `content`, which must be the runs' text with `MD_TRIM_CHARS` trimmed
    (only its start trimmed and some of its end cut, unless `whole`)."""
    text = _text_of(src, runs)
    lead = len(text) - len(text.lstrip(MD_TRIM_CHARS))
    if text[lead:lead + len(content)] != content or (
            whole and text.strip(MD_TRIM_CHARS) != content):
        raise MappingFailed(f"content {content[:40]!r} is not where its rule read it")
    found = SourceMap(runs or [(0, 0, 0, False)], len(text))
    return found.shifted(lead, len(content))


def _cells(src: str, start: int, end: int) -> list[list[tuple[int, int, int, bool]]]:
    """A table row's cells as the table rule splits it (``\\|`` is a pipe in its cell)."""
    text = src[start:end]
    lead = len(text) - len(text.lstrip(MD_TRIM_CHARS))
    start, end = start + lead, start + len(text.rstrip(MD_TRIM_CHARS))
    cells: list[list[tuple[int, int, int, bool]]] = []
    current: list[tuple[int, int, int, bool]] = []
    offset, last, escaped = 0, start, False
    for pos in range(start, end):
        char = src[pos]
        if char == "|":
            if not escaped:
                current.append((offset, last, pos - last, False))
                cells.append(current)
                current, offset, last = [], 0, pos + 1
            else:  # the backslash is dropped
                current.append((offset, last, pos - 1 - last, False))
                offset += pos - 1 - last
                last = pos
        escaped = char == "\\"
    current.append((offset, last, end - last, False))
    cells.append(current)
    if cells and not _text_of(src, cells[0]):
        cells.pop(0)
    if cells and not _text_of(src, cells[-1]):
        cells.pop()
    return cells


def _record_block(tracker: Tracker, state: StateBlock, rule: str, new: list[Token]) -> None:
    """Map the text-holding tokens `rule` just pushed, with the line marks it read."""
    rows: dict[int, list[list[tuple[int, int, int, bool]]]] = {}
    """A table row's cells, last first, so each cell token takes the next in order."""
    for token in new:
        if id(token) in tracker.maps or token.map is None:
            continue
        first, after = token.map
        if token.type == "inline" and rule in ("paragraph", "lheading"):
            runs = _lines(state, first, after, state.blkIndent, False)
            found = _trimmed(state.src, runs, token.content)
        elif token.type == "inline" and rule == "heading":
            pos = state.bMarks[first] + state.tShift[first]
            line_end = state.eMarks[first]
            while pos < line_end and state.src[pos] == "#":
                pos += 1
            found = _trimmed(state.src, [(0, pos, line_end - pos, False)], token.content,
                             whole=False)  # a closing run of '#' is not content
            if not token.content:
                found = SourceMap([(0, pos, 0, False)], 0)
        elif token.type == "inline" and rule == "table":
            if first not in rows:
                rows[first] = _cells(state.src, state.bMarks[first] + state.tShift[first],
                                     state.eMarks[first])[::-1]
            cells = rows[first]
            cell = cells.pop() if cells else [(0, state.eMarks[first], 0, False)]
            found = _trimmed(state.src, cell, token.content)
        elif token.type == "html_block":
            runs = _lines(state, first, after, state.blkIndent, True)
            found = SourceMap(runs, len(token.content))
            if _text_of(state.src, runs) != token.content:
                raise MappingFailed("an HTML block is not where its rule read it")
        elif token.type in ("code_block", "fence"):  # only where it starts and ends
            start, end = state.bMarks[first], state.eMarks[max(after - 1, first)]
            found = SourceMap([(0, start, end - start, False)], end - start)
        else:
            continue
        tracker.maps[id(token)] = found
        tracker.tokens.append(token)


def _tracked_block(name: str, rule: Callable[..., bool]) -> Callable[..., bool]:
    def tracked(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
        if silent:
            return rule(state, start_line, end_line, silent)
        count = len(state.tokens)
        found = rule(state, start_line, end_line, silent)
        if found and len(state.tokens) > count:
            _record_block(tracker_of(state.env), state, name, state.tokens[count:])
        return found
    return tracked


# -- inline rules -----------------------------------------------------------------------


class _TrackedInlineState(StateInline):
    """An inline state that knows where its pending text began and which rule runs."""

    def __init__(self, src: str, md: MarkdownIt, env: MutableMapping[str, Any],
                 out_tokens: list[Token]) -> None:
        super().__init__(src, md, env, out_tokens)
        self.tracker = tracker_of(env)
        self.pending_start = 0
        """Where the pending text began in `src` (earlier, when the newline rule trimmed
        it to nothing: only a span's end is ever used)."""
        self.pending_open = False
        self.rule_start: int | None = None
        """Where the innermost running rule started; None inside `tokenize` between rules
        (its last flush ends at `pos`)."""

    def append_pending(self, text: str) -> None:
        if not self.pending_open:
            self.pending_start, self.pending_open = self.pos, True
        super().append_pending(text)

    def pushPending(self) -> Token:
        end = self.rule_start
        token = super().pushPending()
        self.pending_open = False
        self.span(token, self.pending_start, self.pos if end is None else end)
        return token

    def span(self, token: Token, start: int, end: int) -> None:
        """Record `token`'s span in `src`, unless an inner rule or a flush did."""
        if id(token) not in self.tracker.spans:
            self.tracker.spans[id(token)] = (start, end)
            self.tracker.tokens.append(token)


class _TrackedInline(ParserInline):
    """markdown-it's inline parser, over `_TrackedInlineState`."""

    def tokenize(self, state: StateInline) -> None:
        if not isinstance(state, _TrackedInlineState):
            raise MappingFailed("an inline parse outside a tracked state")
        outer, state.rule_start = state.rule_start, None
        super().tokenize(state)  # an exception ends the whole parse: nothing to restore
        state.rule_start = outer

    def parse(self, src: str, md: MarkdownIt, env: MutableMapping[str, Any],
              tokens: list[Token]) -> list[Token]:
        state = _TrackedInlineState(src, md, env, tokens)
        self.tokenize(state)
        for rule in self.ruler2.getRules(""):
            rule(state)
        return state.tokens


def _tracked_inline(rule: Callable[[StateInline, bool], bool]
                    ) -> Callable[[StateInline, bool], bool]:
    def tracked(state: StateInline, silent: bool) -> bool:
        if silent:
            return rule(state, silent)
        if not isinstance(state, _TrackedInlineState):
            raise MappingFailed("an inline rule outside a tracked state")
        start, count, outer = state.pos, len(state.tokens), state.rule_start
        state.rule_start = start
        found = rule(state, silent)  # an exception ends the whole parse: nothing to restore
        state.rule_start = outer
        if found:
            for token in state.tokens[count:]:  # a flushed text has its span already
                state.span(token, start, state.pos)
        return found
    return tracked


def tracking_parser() -> MarkdownIt:
    """CommonMark with raw HTML and GitHub's tables, recording source positions.

    Parse with ``md.parse(text, {"capsa_tracker": Tracker()})``; `text`
    must have Unix line ends (markdown-it's own normalising then only turns
    NUL into U+FFFD, one character for one). Token structure differs from a
    plain markdown-it in one way that renders the same: adjacent text tokens are
    not joined (``text_join``, ``fragments_join`` are off), and escapes stay
    ``text_special``.
    """
    md = MarkdownIt("commonmark")
    md.inline = _TrackedInline()
    md.configure("commonmark").enable("table").disable(["text_join", "fragments_join"])
    for block in md.block.ruler.__rules__:
        if block.name in _BLOCK_CONTENT:
            md.block.ruler.at(block.name, _tracked_block(block.name, block.fn),
                              {"alt": list(block.alt)})
    for inline in md.inline.ruler.__rules__:
        md.inline.ruler.at(inline.name, _tracked_inline(inline.fn), {"alt": list(inline.alt)})
    return md
