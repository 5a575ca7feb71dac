"""Which stretches of an HTML page a browser never shows as text, found as its tokenizer does.

`hidden_ranges` reads a page (Markdown rendered to HTML) in one pass with the
states of the HTML tokenizer that decide what is text: data, tags and their
quoted attribute values, comments (``<!-->`` and ``--!>`` included), bogus
comments (``<?``, ``<!x``, ``</3``, CDATA in HTML), DOCTYPE, RAWTEXT
(``style``, ``iframe``, ``noembed``, ``noframes``, ``noscript`` as a browser
running scripts reads it, ``xmp``), RCDATA (``title``, ``textarea``),
PLAINTEXT, and script data with its escaped and double-escaped states. A
``template``'s content is parsed as HTML, so it ends at its own end tag
however deeply templates nest. Tag names compare in ASCII case only, as
browsers do.

Of tree construction it keeps the part that picks those states: inside
``<svg>`` and ``<math>`` no tag switches state (an SVG ``<textarea>`` holds
markup, an SVG ``<script>`` ends at its end tag outside comments) and CDATA
is text, until an HTML tag breaks out (``<p>``, ``<div>``, ``</p>``, ...), an
end tag closes an HTML element they are in, or an integration point
(``foreignObject``, ``desc``, ``title``, MathML's ``mi`` ...) lets HTML's rules
read what is inside it.

Hidden: comments of every kind and DOCTYPEs, the ``script``, ``style``,
``template``, ``noscript``, ``title``, ``iframe``, ``noembed`` and ``noframes``
elements whole (start tag to end tag, or to the end of the page; in SVG and
MathML too, by name), and a tag whose extent reaches past the markup it
started in (`reaches_text`): text inside an unfinished attribute value is
not shown.

Not modelled: the rest of tree construction (``<select>``, tables, adoption
of formatting elements), and whether an HTML element an end tag names is
really open is judged from the start and end tags seen outside SVG and MathML.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["HIDING_ELEMENTS", "HiddenRange", "hidden_ranges", "ignored_self_closing"]

HIDING_ELEMENTS = frozenset({"script", "style", "template", "noscript", "title", "iframe",
                             "noembed", "noframes"})
"""Elements no browser renders the content of."""

_HIDING_TEXT = HIDING_ELEMENTS - {"template"}
"""The hiding elements whose content is text to their end tag (RAWTEXT, RCDATA, script)."""

_BREAKOUT = frozenset({
    "b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em",
    "embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing",
    "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong",
    "strike", "sub", "sup", "table", "tt", "u", "ul", "var"})
"""HTML start tags that end SVG and MathML content where they appear (and ``font`` with
``color``, ``face`` or ``size``)."""
_MATHML_TEXT = frozenset({"mi", "mo", "mn", "ms", "mtext"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})
_FONT_BREAKOUT = re.compile(r"[\t\n\f\r /](?:color|face|size)[\t\n\f\r />=]",
                            re.IGNORECASE | re.ASCII)
_HTML_ENCODING = re.compile(r"encoding[\t\n\f\r ]*=[\t\n\f\r ]*[\"']?"
                            r"(?:text/html|application/xhtml\+xml)[\"'\t\n\f\r />]",
                            re.IGNORECASE | re.ASCII)

_SPACE = "\t\n\f\r "
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_FLAGS = re.IGNORECASE | re.ASCII  # browsers lower-case ASCII only: no 'ſ' for 's'

_COMMENT_END = re.compile(r"--!?>")
_TAG_NAME = re.compile(r"[^\t\n\f\r />]*+")
_NAME_RUN = re.compile(r"[^\t\n\f\r />=]*+")
_VALUE_RUN = re.compile(r"[^\t\n\f\r >]*+")
_SPACES = re.compile(r"[\t\n\f\r ]*+")
_SCRIPT_DATA = re.compile(r"</script(?=[\t\n\f\r />])|<!--", _FLAGS)
_SCRIPT_ESCAPED = re.compile(r"--+>|</script(?=[\t\n\f\r />])|<script(?=[\t\n\f\r />])",
                             _FLAGS)
_SCRIPT_DOUBLE_ESCAPED = re.compile(r"--+>|</script(?=[\t\n\f\r />])", _FLAGS)


@dataclass(frozen=True)
class HiddenRange:
    """One stretch of the page no browser shows as text."""

    start: int
    """Offset of its ``<``."""
    end: int
    """Offset after its last character (after a ``>``, or the page's length)."""
    what: str
    """``"comment"`` (comments, processing instructions, declarations), ``"tag"``, or the
    hiding element's name."""


def hidden_ranges(page: str, reaches_text: Callable[[int, int], bool]) -> list[HiddenRange]:
    """Every stretch of `page` a browser does not show, in order, none inside another.

    Args:
        page: the HTML.
        reaches_text: whether a tag from `start` to `end` reaches past the markup
            it started in; such a tag hides what it swallowed, and is reported.
    """
    return _Reader(page, reaches_text).run()


def ignored_self_closing(page: str) -> list[int]:
    """The offsets of the ``/`` in every ``/>`` that HTML ignores, in order.

    A ``/>`` closes a void element (``<br/>``) and an SVG or MathML one, and
    nothing else: ``<div hidden/>words</div>`` and ``<script/>words</script>``
    hold their words, as every browser reads them. libxml2's HTML parser
    closes the element at ``/>`` instead, so the words would become text
    after a hidden element, or after a script, and reach the model. Removing
    these slashes first makes libxml2 build the tree a browser builds.
    """
    reader = _Reader(page, lambda start, end: False)
    reader.ignored_slashes = []
    reader.run()
    return reader.ignored_slashes


@dataclass
class _Open:
    """An element open inside SVG or MathML (or HTML inside one of their integration
    points): what decides whether the next tag is read by HTML's rules or foreign ones."""

    name: str
    space: str
    """``"svg"``, ``"math"`` or ``"html"``."""
    start: int
    integration: bool = False
    """An HTML integration point (SVG ``foreignObject``, ``desc``, ``title``; MathML
    ``annotation-xml`` for HTML): HTML's rules read the tags inside."""

    @property
    def mathml_text(self) -> bool:
        return self.space == "math" and self.name in _MATHML_TEXT


class _Reader:
    """One pass over a page with the tokenizer's states and the part of tree construction
    that picks them: whether a tag is read in HTML or in SVG and MathML."""

    def __init__(self, page: str, reaches_text: Callable[[int, int], bool]) -> None:
        self.page, self.reaches_text = page, reaches_text
        self.found: list[HiddenRange] = []
        self.template_start, self.templates = 0, 0
        self.open: list[_Open] = []
        """Elements open in SVG or MathML content and inside it; empty in plain HTML."""
        self.open_hiding = 0
        """How many of `open` are SVG or MathML elements hidden by their name."""
        self.open_at: dict[tuple[bool, str], list[int]] = {}
        """Where in `open` each (HTML?, name) stands: an end tag finds its element in
        constant time, however deep the nesting."""
        self.html_at: list[int] = []
        """Where in `open` the HTML elements stand."""
        self.boundaries_at: list[int] = []
        """Where in `open` the integration points stand (an end tag read by HTML's rules
        stops there)."""
        self.outer: list[str] = []
        """HTML elements open outside SVG and MathML, by name (as far as start and end
        tags tell: enough to know whether an end tag there closes SVG or MathML too)."""
        self.outer_at: dict[str, list[int]] = {}
        self.ignored_slashes: list[int] | None = None
        """Where the ``/`` of each ``/>`` HTML ignores stands, when asked for."""

    def hide(self, start: int, end: int, what: str) -> None:
        # inside a template or a hiding SVG/MathML element, all goes with that element
        if self.templates == 0 and self.open_hiding == 0:
            self.found.append(HiddenRange(start, end, what))

    def run(self) -> list[HiddenRange]:
        page, pos = self.page, 0
        while (at := page.find("<", pos)) >= 0:
            after = page[at + 1:at + 2]
            if page.startswith("<!--", at):
                pos = _comment_end(page, at)
                self.hide(at, pos, "comment")
            elif page.startswith("<![CDATA[", at) and self.open and \
                    self.open[-1].space != "html":  # text in SVG and MathML
                closing = page.find("]]>", at + 9)
                pos = len(page) if closing < 0 else closing + 3
            elif after in ("!", "?"):
                pos = _bogus_comment_end(page, at + 2)
                self.hide(at, pos, "comment")
            elif after == "/":
                following = page[at + 2:at + 3]
                if following.isascii() and following.isalpha():
                    name, pos, _ = _tag(page, at + 2)
                    if self.reaches_text(at, pos):
                        self.hide(at, pos, "tag")
                    self.end_tag(name, at, pos)
                elif following == ">":
                    pos = at + 3  # "</>" is dropped
                elif not following:
                    break
                else:
                    pos = _bogus_comment_end(page, at + 2)
                    self.hide(at, pos, "comment")
            elif after.isascii() and after.isalpha():
                name, pos, closed = _tag(page, at + 1)
                if self.reaches_text(at, pos):
                    self.hide(at, pos, "tag")
                if self.in_html(name):
                    pos = self.html_start_tag(name, at, pos, closed)
                else:
                    pos = self.foreign_start_tag(name, at, pos, closed)
                if pos < 0:  # <plaintext>: the rest is text
                    break
            else:
                pos = at + 1
        self.close_all(len(page))
        return self.found

    # -- which rules read a tag -----------------------------------------------------------

    def in_html(self, start_tag: str | None) -> bool:
        """Whether HTML's rules read the next start tag (`start_tag`) or end tag (None)."""
        if not self.open:
            return True
        node = self.open[-1]
        if node.space == "html":
            return True
        if start_tag is None:
            return False
        return (node.integration
                or (node.mathml_text and start_tag not in ("mglyph", "malignmark"))
                or (node.space == "math" and node.name == "annotation-xml"
                    and start_tag == "svg"))

    def html_start_tag(self, name: str, at: int, pos: int, closed: bool) -> int:
        """A start tag read by HTML's rules; returns where to read on (-1: nowhere)."""
        page = self.page
        if closed and self.ignored_slashes is not None and name not in _VOID and \
                name not in ("svg", "math"):
            self.ignored_slashes.append(pos - 2)
        if name in _HIDING_TEXT:
            end = _content_end(page, pos, name)
            self.hide(at, end, name)
            return end
        if name == "template":
            self.template_start = at if self.templates == 0 else self.template_start
            self.templates += 1
        elif name in ("textarea", "xmp"):  # shown, but never markup inside
            return _content_end(page, pos, name)
        elif name == "plaintext":
            return -1
        elif name in ("svg", "math"):
            if not closed:
                self.push(_Open(name, name, at))
        elif name not in _VOID and self.open:
            self.push(_Open(name, "html", at))
        elif name not in _VOID:
            self.outer_at.setdefault(name, []).append(len(self.outer))
            self.outer.append(name)
        return pos

    def foreign_start_tag(self, name: str, at: int, pos: int, closed: bool) -> int:
        """A start tag in SVG or MathML: an element of theirs, or HTML breaking out."""
        if name in _BREAKOUT or (name == "font" and _FONT_BREAKOUT.search(
                self.page, at, pos) is not None):
            self.break_out(at)
            return self.html_start_tag(name, at, pos, closed)
        space = self.open[-1].space
        if not closed:
            integration = (space == "svg" and name in ("foreignobject", "desc", "title")) or (
                space == "math" and name == "annotation-xml"
                and _HTML_ENCODING.search(self.page, at, pos) is not None)
            self.push(_Open(name, space, at, integration))
        return pos

    def break_out(self, at: int) -> None:
        """Close SVG and MathML elements up to HTML or an integration point."""
        while self.open and not (self.open[-1].space == "html" or self.open[-1].integration
                                 or self.open[-1].mathml_text):
            self.pop(at)

    def end_tag(self, name: str, at: int, end: int) -> None:
        if not self.in_html(None) and name not in ("br", "p"):
            # the foreign rules walk down to the first element below HTML: it is the nearest
            # element of that name among those, if any
            found = self.open_at.get((False, name))
            lowest = self.html_at[-1] + 1 if self.html_at else 0
            if found and found[-1] >= lowest:
                self.pop_to(found[-1], end)
                return
        elif not self.in_html(None):  # </p> and </br> break out of SVG and MathML
            self.break_out(at)
        self.html_end_tag(name, at, end)

    def html_end_tag(self, name: str, at: int, end: int) -> None:
        """An end tag read by HTML's rules: it closes its element and what is open inside,
        SVG and MathML included, unless an integration point stands in between."""
        found = self.open_at.get((True, name))
        boundary = self.boundaries_at[-1] if self.boundaries_at else -1
        if found and found[-1] > boundary:
            self.pop_to(found[-1], end)
            return
        if boundary >= 0:
            return  # out of scope: ignored
        positions = self.outer_at.get(name)
        if positions:  # an element outside: it closes everything SVG and MathML opened
            start = positions[-1]
            while self.open:
                self.pop(at)
            for closed in self.outer[start:]:
                self.outer_at[closed].pop()
            del self.outer[start:]
        if name == "template" and self.templates:
            self.templates -= 1
            if self.templates == 0:
                self.found.append(HiddenRange(self.template_start, end, "template"))

    def push(self, node: _Open) -> None:
        index = len(self.open)
        self.open.append(node)
        self.open_at.setdefault((node.space == "html", node.name), []).append(index)
        if node.space == "html":
            self.html_at.append(index)
        elif node.name in HIDING_ELEMENTS:
            self.open_hiding += 1
        if node.integration or node.mathml_text:
            self.boundaries_at.append(index)

    def pop(self, end: int) -> None:
        node = self.open.pop()
        self.open_at[(node.space == "html", node.name)].pop()
        if node.space == "html":
            self.html_at.pop()
        if node.integration or node.mathml_text:
            self.boundaries_at.pop()
        if node.name in HIDING_ELEMENTS and node.space != "html":
            self.open_hiding -= 1
            self.hide(node.start, end, node.name)

    def pop_to(self, index: int, end: int) -> None:
        """Close the element at `index` in `open` and every one opened inside it."""
        while len(self.open) > index:
            self.pop(end)

    def close_all(self, end: int) -> None:
        while self.open:
            self.pop(end)
        if self.templates:
            self.found.append(HiddenRange(self.template_start, end, "template"))


def _comment_end(page: str, at: int) -> int:
    """After the comment opened by the ``<!--`` at `at`."""
    if page.startswith(">", at + 4):
        return at + 5
    if page.startswith("->", at + 4):
        return at + 6
    closing = _COMMENT_END.search(page, at + 4)
    return len(page) if closing is None else closing.end()


def _bogus_comment_end(page: str, pos: int) -> int:
    """After the first ``>`` from `pos`: the end of a bogus comment or DOCTYPE."""
    closing = page.find(">", pos)
    return len(page) if closing < 0 else closing + 1


def _tag(page: str, name_start: int) -> tuple[str, int, bool]:
    """A tag's name in lower case, the offset after its ``>`` (the page's length when it
    never closes: the tag swallows the rest), and whether it ends with ``/>``."""
    name_end = _run_end(_TAG_NAME, page, name_start)
    end, closed = _attributes_end(page, name_end)
    return page[name_start:name_end].translate(_ASCII_LOWER), end, closed


def _attributes_end(page: str, pos: int) -> tuple[int, bool]:
    """After the ``>`` that ends a tag, its attributes read from `pos` (HTML's attribute
    states: a ``>`` inside a quoted value does not end it), and whether a ``/`` came
    right before that ``>`` (a self-closing tag)."""
    size = len(page)
    state, slash = "before_name", False
    while pos < size:
        char = page[pos]
        if char == ">":  # outside a quoted value, in every state
            return pos + 1, slash
        slash = False
        if char in _SPACE:
            pos = _run_end(_SPACES, page, pos)
            if state == "name":
                state = "after_name"
            elif state in ("unquoted", "after_quoted"):
                state = "before_name"
            continue
        if state == "before_value":
            if char in "\"'":
                closing = page.find(char, pos + 1)
                if closing < 0:
                    return size, False
                pos, state = closing + 1, "after_quoted"
            else:
                pos, state = _run_end(_VALUE_RUN, page, pos), "unquoted"
            continue
        if state == "unquoted":  # only a space or '>' ends an unquoted value
            pos = _run_end(_VALUE_RUN, page, pos)
            continue
        if char == "/":
            pos, state, slash = pos + 1, "before_name", True
            continue
        if char == "=" and state in ("name", "after_name"):
            pos, state = pos + 1, "before_value"
            continue
        # a new attribute name (from before_name, after_name or after_quoted; '=' may
        # be its first character), or more of the current one
        pos, state = _run_end(_NAME_RUN, page, pos + 1), "name"
    return size, False


def _run_end(run: re.Pattern[str], page: str, pos: int) -> int:
    """Where a run of `run`'s characters from `pos` ends (it may be empty)."""
    found = run.match(page, pos)
    return pos if found is None else found.end()


def _content_end(page: str, pos: int, name: str) -> int:
    """After the end tag that closes the RAWTEXT, RCDATA or script element `name` whose
    content starts at `pos`; the page's length when none does."""
    if name == "script":
        closing = _script_end_tag(page, pos)
    else:
        found = re.compile(rf"</{name}(?=[\t\n\f\r />])", _FLAGS).search(page, pos)
        closing = None if found is None else found.end()
    if closing is None:
        return len(page)
    return _attributes_end(page, closing)[0]


def _script_end_tag(page: str, pos: int) -> int | None:
    """The offset after ``</script`` of the end tag that closes a script whose content
    starts at `pos`, through the escaped (``<!--``) and double-escaped
    (``<!--<script>``) states; None when the script runs to the end."""
    state = _SCRIPT_DATA
    while (found := state.search(page, pos)) is not None:
        token = found.group().lower()
        if state is _SCRIPT_DATA:
            if token.startswith("</"):
                return found.end()
            state, pos = _SCRIPT_ESCAPED, found.start() + 2  # at the dashes of "<!--"
        elif token.endswith(">") and token.startswith("-"):
            state, pos = _SCRIPT_DATA, found.end()
        elif state is _SCRIPT_ESCAPED and token.startswith("</"):
            return found.end()
        elif state is _SCRIPT_ESCAPED:  # "<script" and a delimiter: double-escaped
            state, pos = _SCRIPT_DOUBLE_ESCAPED, found.end() + 1
        else:  # "</script" and a delimiter: back to escaped
            state, pos = _SCRIPT_ESCAPED, found.end() + 1
    return None
