"""MathML in HTML, given the linear text unstructured can read.

unstructured 0.27 reads a ``<math>`` element only through a TeX annotation
or an ``alttext`` attribute, which KaTeX and MathJax write and a hand-written
page, a Wikipedia export or a pandoc conversion often do not: "Area is
<math>πr²</math> square units" read "Area is square units". `annotate_math`
gives every ``<math>`` that has neither an ``alttext`` holding its linear
text, written as Word's equations are (`capsa.guard.extractors._docx_math`,
close to Word's linear format): ``π r^2``, ``(a+b)/2``, ``√(x+1)``,
``∑_(i=1)^n``, ``[1, 0; 0, 1]``. Runs in the parsed tree, after the hidden
elements are taken out.

Presentation MathML is read by its structure: tokens (``mi``, ``mn``,
``mo``, ``mtext``, ``ms``) as their text; ``mfrac``, ``msup``, ``msub``,
``msubsup``, ``munder``, ``mover``, ``munderover``, ``msqrt``, ``mroot``,
``mfenced``, ``mtable``; ``mphantom`` (drawn invisible) and annotations
left out; of an ``maction``, only the child it shows (its ``selection``, the
first by default: the others appear only on a click or a hover, in the
browsers that still implement it); any other element as its content in
order, so no character is lost. Inside a token, the content of an element
no browser draws (a ``script``, a ``style``, a ``template``:
`capsa.guard.extractors._html_hiding.HIDING_ELEMENTS`) is left out, as
unstructured leaves it out of the rest of the page; the ``alttext`` is written
before unstructured strips those elements. Content followed 64 elements
deep, then read as its text in order.
"""

from __future__ import annotations

from typing import Any

from capsa.guard.extractors._html_hiding import HIDING_ELEMENTS
from capsa.guard.extractors._linear_math import OPENING, ROOTS, operand

__all__ = ["annotate_math", "linear_mathml"]

_TEX = frozenset({"application/x-tex", "tex", "latex", "application/x-latex"})
"""The annotation encodings unstructured reads (its ``TEX_ENCODINGS``)."""
_MAX_DEPTH = 64
_SKIPPED = frozenset({"annotation", "annotation-xml", "mphantom", "none", "mprescripts"})
_TOKENS = frozenset({"mi", "mn", "mo", "mtext", "ms"})
_BIG_OPERATORS = frozenset("∑∏∐∫∬∭∮⋀⋁⋂⋃⨀⨁⨂")


def annotate_math(root: Any) -> int:
    """Give each ``<math>`` under `root` that unstructured would read as nothing an
    ``alttext`` of its linear text; returns how many."""
    if root is None:
        return 0
    given = 0
    for math in root.iter("math"):
        if (math.get("alttext") or "").strip() or _has_tex(math):
            continue
        text = linear_mathml(math)
        if text:
            math.set("alttext", text)
            given += 1
    return given


def linear_mathml(element: Any) -> str:
    """The linear text of a MathML element (see the module docstring).

    Examples:
        >>> from lxml import etree
        >>> sum_ = "<mrow><mi>a</mi><mo>+</mo><mi>b</mi></mrow>"
        >>> linear_mathml(etree.fromstring(f"<math><mfrac>{sum_}<mn>2</mn></mfrac></math>"))
        '(a+b)/2'
    """
    return " ".join(_Reader().read(element, 0).split())


def _name(element: Any) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def _drawn_text(element: Any) -> str:
    """`element`'s text in order, without comments and without the content of the elements
    no browser draws (`HIDING_ELEMENTS`), whose tails stay; a loop, never a recursion."""
    pieces: list[str] = []
    pending: list[Any] = [element]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            pieces.append(item)
            continue
        if not isinstance(item.tag, str) or _name(item) in HIDING_ELEMENTS:
            continue
        pieces.append(item.text or "")
        for child in reversed(item):
            if child.tail:
                pending.append(child.tail)
            pending.append(child)
    return "".join(pieces)


def _shown_child(action: Any, parts: list[Any]) -> Any:
    """The child an ``maction`` shows: the one its ``selection`` names, the first when it
    names none or names no child (MathML 3's rule; by default browsers draw the first
    child only)."""
    try:
        chosen = int((action.get("selection") or "1").strip())
    except ValueError:
        chosen = 1
    if not parts:
        return None
    return parts[chosen - 1] if 1 <= chosen <= len(parts) else parts[0]


def _has_tex(math: Any) -> bool:
    return any((annotation.get("encoding") or "").strip().lower() in _TEX
               for annotation in math.iter("annotation"))


def _after(base: Any) -> str:
    """A space after the limits of a big operator or a named one (``∑_(i=1)^n x_i``,
    ``lim_(n→∞) a_n``), so what it applies to stands apart."""
    text = _drawn_text(base).strip()
    return " " if text in _BIG_OPERATORS or (len(text) > 1 and text.isalpha()) else ""


def _fenced(table: Any) -> bool:
    """Whether brackets of its own surround a ``mtable``: an ``mfenced``, or an ``mo``
    bracket just before it."""
    parent = table.getparent()
    if parent is not None and _name(parent) == "mfenced":
        return True
    before = table.getprevious()
    return before is not None and _name(before) == "mo" and (
        "".join(before.itertext()).strip() in OPENING)


class _Reader:
    def read(self, element: Any, depth: int) -> str:
        name = _name(element)
        if not name or name in _SKIPPED:
            return ""
        if depth >= _MAX_DEPTH:
            return self._flat(element)
        if name in _TOKENS:
            return _drawn_text(element)
        if name == "mspace":
            return " "
        parts = [child for child in element if _name(child)]
        depth += 1
        if name == "maction":
            shown = _shown_child(element, parts)
            return self.read(shown, depth) if shown is not None else ""
        if name == "semantics":
            return self.read(parts[0], depth) if parts else ""
        if name == "mfrac" and len(parts) == 2:
            bar = "¦" if (element.get("linethickness") or "").strip() in ("0", "0px") else "/"
            return (operand(self.read(parts[0], depth)) + bar
                    + operand(self.read(parts[1], depth)))
        if name in ("msup", "mover") and len(parts) == 2:
            return self._scripted(parts, depth, "^")
        if name in ("msub", "munder") and len(parts) == 2:
            return self._scripted(parts, depth, "_")
        if name in ("msubsup", "munderover") and len(parts) == 3:
            return (self._scripted(parts[:2], depth, "_", spaced=False) + "^"
                    + operand(self.read(parts[2], depth)) + _after(parts[0]))
        if name == "msqrt":
            return "√" + operand(self._joined(parts, depth))
        if name == "mroot" and len(parts) == 2:
            base, index = self.read(parts[0], depth), self.read(parts[1], depth).strip()
            return ROOTS[index] + operand(base) if index in ROOTS else f"√({index}&{base})"
        if name == "mfenced":
            separator = (element.get("separators") or ",").strip()[:1]
            inside = separator.join(self.read(part, depth) for part in parts)
            return (element.get("open") or "(") + inside + (element.get("close") or ")")
        if name == "mtable":
            rows = "; ".join(", ".join(self.read(cell, depth) for cell in row if _name(cell))
                             for row in parts)
            return rows if _fenced(element) else f"[{rows}]"
        return self._joined(parts, depth)

    def _scripted(self, parts: list[Any], depth: int, mark: str, *, spaced: bool = True) -> str:
        return (operand(self.read(parts[0], depth)) + mark + operand(self.read(parts[1], depth))
                + (_after(parts[0]) if spaced else ""))

    def _joined(self, parts: list[Any], depth: int) -> str:
        return "".join(self.read(part, depth) for part in parts)

    def _flat(self, element: Any) -> str:
        """`element`'s text in order, read by a loop, annotations and phantoms left out."""
        pieces: list[str] = []
        stack = [element]
        while stack:
            current = stack.pop()
            if _name(current) in _SKIPPED:
                continue
            if _name(current) in _TOKENS:
                pieces.append(_drawn_text(current))
                continue
            children = [child for child in current if _name(child)]
            if _name(current) == "maction":
                shown = _shown_child(current, children)
                children = [shown] if shown is not None else []
            stack.extend(reversed(children))
        return "".join(pieces)
