"""Word equations, read as the linear text Word itself writes for them.

An equation is text a reader sees: a formula in a paper, a rate in a
contract (``r = (1+i)^(1/12) - 1``), a tolerance in a specification. Word
stores it as Office Math (``m:oMath``, inside ``m:oMathPara`` when it stands
on its own line), which python-docx does not yield, so unstructured 0.27
lost every word and number in it without a word said: "Energy is E=mc²
always." read "Energy is  always.", and a displayed equation vanished with
its paragraph.

`read_equations` rewrites the document python-docx has just parsed, in
memory, before unstructured reads it: each equation is replaced by a run
holding its linear text, close to Word's own linear format (UnicodeMath),
which a model follows as it follows code:

- runs are read in order; a fraction is ``a/b``, and ``(a+b)/(2c)`` when a
  part is more than one symbol (a number or a word of letters counts as
  one); ``¦`` for a fraction without a bar (a binomial);
- scripts are ``x^2``, ``x_i``, ``x_i^2``, ``x^(n+1)``; a prescript is
  ``_6^14 C``; a limit below or above is ``lim_(n→∞)``;
- a root is ``√x``, ``√(x+1)``, ``∛x``, ``∜x``, ``√(5&x)``;
- an n-ary operator is ``∑_(i=1)^n x_i`` (``∫`` when the operator is not
  named, as Word draws it);
- delimiters keep their characters (parentheses by default, ``|`` between
  parts); a function is ``sin x``, ``sin(x+y)``; an accent or a bar follows
  its base as a combining mark (``x̂``, ``x̅``); a box is its content;
- a matrix is ``[1, 0; 0, 1]`` (its brackets are its delimiter's when it has
  one), an equation array's rows are lines, or ``; ``-separated inside a
  larger structure;
- anything else is its text in order: an element this module does not know
  never loses a character.

An equation inside a paragraph stays where it stands; a displayed equation
keeps its own paragraph, or its own line when a paragraph holds text beside
it. Runs Word hides (``w:vanish`` or ``w:specVanish``, set on the math run
itself or given by its character, paragraph or table style or the document
defaults, as `capsa.guard.extractors._office_hidden` decides for any run:
a paragraph whose style hides it hides its equations with its words) and a
phantom Word does not show (``m:phantPr/m:show`` off) are left
out, and counted; tracked deletions inside an equation are left out, as in
the body. Structures are followed 64 elements deep; deeper than that, a
crafted 10,000-level equation is read as its text in order by a loop, so
neither the recursion limit nor quadratic copying is ever reached.

Run after the containers are opened (`capsa.guard.extractors._docx_containers`)
and the notes appended (`capsa.guard.extractors._docx_notes`), so an
equation in a tracked insertion, a content control, a text box or a
footnote is found where the reader sees it.

Not read: an equation embedded as an OLE object (Equation Editor 3.0), which
holds a picture and binary data, no text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._docx_containers import text_roots
from capsa.guard.extractors._linear_math import OPENING, ROOTS, operand

__all__ = ["Equations", "linear_text", "read_equations"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_MATH = (f"{_M}oMathPara", f"{_M}oMath")
_DELETED = frozenset({f"{_W}del", f"{_W}moveFrom"})
_UNREAD = (*_DELETED, f"{_W}txbxContent")
"""Where an equation is left as it is: a tracked deletion, and a text box still in its
drawing once the containers are opened (the copy written for old readers), which
unstructured never reads either."""
_TEXT = frozenset({f"{_M}t", f"{_W}t"})
_MAX_DEPTH = 64
"""Elements followed structurally; below this an equation is read as its text in order."""


@dataclass(frozen=True, slots=True)
class Equations:
    """What `read_equations` did to one document."""

    read: int = 0
    """Equations (``m:oMath``) now read as linear text."""
    hidden: int = 0
    """Math runs Word hides and phantoms it does not show, left out."""

    def note(self) -> str | None:
        """The extraction note, or None when the document has no equation: the linear form is
        capsa's writing, not the document's, and a reader should know how to read it."""
        if not self.read:
            return None
        said = (f"read {self.read} equation(s) as linear text, as Word's linear format writes "
                "them: a fraction as a/b, a power as x^2, an index as x_i, a root as √x")
        if self.hidden:
            said += f"; left out {self.hidden} part(s) of them Word does not show"
        return said


def read_equations(document: Any) -> Equations:
    """Replace each equation of a python-docx `document`'s body, headers and footers by a
    run holding its linear text.

    Returns how many equations were read. An equation inside a tracked
    deletion or a text box's second copy is left where it is (unstructured
    reads neither); an empty one is left as it is.
    """
    read = hidden = 0
    hidden_run = _hiding(document)
    for root in text_roots(document):
        done: set[Any] = set()
        for math in list(root.iter(*_MATH)):
            if math in done:
                continue
            done.update(math.iter(*_MATH))  # an equation inside this one is read with it
            if next(math.iterancestors(*_UNREAD), None) is not None:
                continue
            reader = _Reader(hidden_run)
            text = reader.linear(math, 0)
            if not text.strip():
                continue
            _replace(math, text)
            read += max(1, len(math.findall(f"{_M}oMath")))  # a display holds one or more
            hidden += reader.hidden
    return Equations(read, hidden)


def linear_text(math: Any) -> str:
    """The linear text of one Office Math element, read where no run can be hidden (a
    PowerPoint equation, ``a14:m``: DrawingML has no hidden-text property)."""
    return _Reader(lambda run: False).linear(math, 0)


def _replace(math: Any, text: str) -> None:
    """Put a run holding `text` where `math` stands: in its paragraph, on its own line there
    when it is displayed beside other text, or as a paragraph of its own in a body or cell."""
    parent = math.getparent()
    if parent is None:
        return
    run = math.makeelement(f"{_W}r", {})
    lines = text.split("\n")
    display = math.tag == f"{_M}oMathPara"
    in_paragraph = next(math.iterancestors(f"{_W}p"), None) is not None
    if display and in_paragraph and _text_beside(math, preceding=True):
        lines.insert(0, "")
    if display and in_paragraph and _text_beside(math, preceding=False):
        lines.append("")
    for number, line in enumerate(lines):
        if number:
            run.append(run.makeelement(f"{_W}br", {}))
        if line:
            value = run.makeelement(f"{_W}t", {_XML_SPACE: "preserve"})
            value.text = line
            run.append(value)
    if in_paragraph:
        new = run
    else:  # a block-level equation (in a body, a cell): a paragraph of its own
        new = math.makeelement(f"{_W}p", {})
        new.append(run)
    new.tail = math.tail
    parent.replace(math, new)


def _text_beside(math: Any, *, preceding: bool) -> bool:
    return any(text.text for sibling in math.itersiblings(preceding=preceding)
               for text in sibling.iter(f"{_W}t"))


def _local(element: Any) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _skipped(element: Any) -> bool:
    """Properties (``m:fPr``, ``w:rPr``, ``m:ctrlPr``) and tracked deletions: never text."""
    tag = element.tag
    return not isinstance(tag, str) or tag.endswith("Pr") or tag in _DELETED


def _value(element: Any, properties: str, name: str) -> str | None:
    """The ``m:val`` of `element`'s ``m:{properties}/m:{name}``: None when absent, ``""`` when
    the property is there without a value (a delimiter drawn as nothing)."""
    found = element.find(f"{_M}{properties}/{_M}{name}")
    if found is None:
        return None
    return found.get(f"{_M}val") or ""


def _on(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("", "1", "on", "true")


def _hiding(document: Any) -> Callable[[Any], bool]:
    """Whether Word hides a math run of `document`: the rule that leaves out the body's
    hidden runs (`capsa.guard.extractors._office_hidden`), styles and defaults included,
    since a math run (``m:r``) takes its run properties (``w:rPr``) from the same places."""
    from capsa.guard.extractors import _office_hidden  # it imports this module: late

    styles_root = None
    try:
        from docx.opc.constants import RELATIONSHIP_TYPE

        styles_root = document.part.part_related_by(RELATIONSHIP_TYPE.STYLES).element
    except (KeyError, ValueError, AttributeError):
        pass  # no styles part (or two): only direct formatting hides, as for the body
    styles = _office_hidden._Styles(styles_root)
    return lambda run: _office_hidden._hidden_run(run, styles)


class _Reader:
    """One equation's linear text; counts what it leaves out because Word does not show it."""

    def __init__(self, hidden_run: Callable[[Any], bool]) -> None:
        self.hidden = 0
        self._hidden_run = hidden_run

    def linear(self, element: Any, depth: int) -> str:
        """`element`'s linear text, structurally to `_MAX_DEPTH`, then as text in order."""
        if _skipped(element):
            return ""
        if depth >= _MAX_DEPTH:
            return self._flat(element)
        tag = element.tag
        if tag in _TEXT:
            return str(element.text or "")
        name = _local(element) if tag.startswith(_M) else ""
        handler = _HANDLERS.get(name)
        if handler is not None:
            return handler(self, element, depth + 1)
        if tag == f"{_W}r" or tag == f"{_M}r":
            return self._run(element)
        return self.children(element, depth + 1)

    def children(self, element: Any, depth: int) -> str:
        return "".join(self.linear(child, depth) for child in element)

    def part(self, element: Any, name: str, depth: int) -> str:
        """The linear text of `element`'s child ``m:{name}`` (``""`` when it has none)."""
        found = element.find(f"{_M}{name}")
        return self.linear(found, depth) if found is not None else ""

    def parts(self, element: Any, name: str, depth: int) -> list[str]:
        return [self.linear(found, depth) for found in element.iterchildren(f"{_M}{name}")]

    def _run(self, run: Any) -> str:
        if self._hidden_run(run):
            self.hidden += any(True for _ in run.iter(*_TEXT))
            return ""
        pieces = []
        for child in run:
            if child.tag in _TEXT:
                pieces.append(child.text or "")
            elif child.tag == f"{_W}tab":
                pieces.append("\t")
        return "".join(pieces)

    def _flat(self, element: Any) -> str:
        """`element`'s text in order, read by a loop: no recursion, linear in its size.

        Every element visited is held until the end and let go deepest first:
        lxml, letting go of an element, looks up its ancestors for one still
        held, so letting go of each as the loop moves on would cost the depth
        each time, and a 10,000-level equation seconds.
        """
        pieces: list[str] = []
        stack = [element]
        held: list[Any] = []
        while stack:
            current = stack.pop()
            held.append(current)
            if _skipped(current):
                continue
            tag = current.tag
            if tag in _TEXT:
                pieces.append(current.text or "")
                continue
            if tag in (f"{_W}r", f"{_M}r") and self._hidden_run(current):
                self.hidden += any(True for _ in current.iter(*_TEXT))
                continue
            if tag == f"{_M}phant" and not self._shown(current):
                continue
            stack.extend(reversed(current))
        del current
        while held:  # children before their parents
            held.pop()
        return "".join(pieces)

    def _shown(self, phantom: Any) -> bool:
        show = _value(phantom, "phantPr", "show")
        if show is None or _on(show):
            return True
        self.hidden += any(True for _ in phantom.iter(*_TEXT))
        return False

    # ------------------------------------------------------------------ the structures

    def fraction(self, element: Any, depth: int) -> str:
        bar = "¦" if _value(element, "fPr", "type") == "noBar" else "/"
        return (operand(self.part(element, "num", depth)) + bar
                + operand(self.part(element, "den", depth)))

    def superscript(self, element: Any, depth: int) -> str:
        return (operand(self.part(element, "e", depth)) + "^"
                + operand(self.part(element, "sup", depth)))

    def subscript(self, element: Any, depth: int) -> str:
        return (operand(self.part(element, "e", depth)) + "_"
                + operand(self.part(element, "sub", depth)))

    def sub_superscript(self, element: Any, depth: int) -> str:
        return (operand(self.part(element, "e", depth)) + "_"
                + operand(self.part(element, "sub", depth)) + "^"
                + operand(self.part(element, "sup", depth)))

    def prescript(self, element: Any, depth: int) -> str:
        return ("_" + operand(self.part(element, "sub", depth)) + "^"
                + operand(self.part(element, "sup", depth)) + " "
                + self.part(element, "e", depth))

    def radical(self, element: Any, depth: int) -> str:
        base = self.part(element, "e", depth)
        degree = "" if _on(_value(element, "radPr", "degHide")) else self.part(
            element, "deg", depth).strip()
        if not degree or degree in ROOTS:
            return ROOTS[degree or "2"] + operand(base)
        return f"√({degree}&{base})"

    def nary(self, element: Any, depth: int) -> str:
        operator = _value(element, "naryPr", "chr")
        text = operator if operator else "∫"
        if not _on(_value(element, "naryPr", "subHide")):
            lower = self.part(element, "sub", depth)
            text += "_" + operand(lower) if lower else ""
        if not _on(_value(element, "naryPr", "supHide")):
            upper = self.part(element, "sup", depth)
            text += "^" + operand(upper) if upper else ""
        body = self.part(element, "e", depth)
        return f"{text} {body}" if body else text

    def delimiter(self, element: Any, depth: int) -> str:
        begin = _value(element, "dPr", "begChr")
        end = _value(element, "dPr", "endChr")
        separator = _value(element, "dPr", "sepChr")
        inside = (separator if separator is not None else "|").join(
            self.parts(element, "e", depth))
        return ((begin if begin is not None else "(") + inside
                + (end if end is not None else ")"))

    def function(self, element: Any, depth: int) -> str:
        name = self.part(element, "fName", depth)
        argument = self.part(element, "e", depth)
        if not argument or argument[0] in OPENING:
            return name + argument
        return f"{name} {argument}"

    def accent(self, element: Any, depth: int) -> str:
        mark = _value(element, "accPr", "chr")
        return operand(self.part(element, "e", depth)) + (mark if mark else "\u0302")

    def bar(self, element: Any, depth: int) -> str:
        over = _value(element, "barPr", "pos") == "top"
        return operand(self.part(element, "e", depth)) + ("\u0305" if over else "\u0332")

    def group_character(self, element: Any, depth: int) -> str:
        mark = _value(element, "groupChrPr", "chr")
        return operand(self.part(element, "e", depth)) + (mark if mark else "\u23df")

    def lower_limit(self, element: Any, depth: int) -> str:
        return (operand(self.part(element, "e", depth)) + "_"
                + operand(self.part(element, "lim", depth)))

    def upper_limit(self, element: Any, depth: int) -> str:
        return (operand(self.part(element, "e", depth)) + "^"
                + operand(self.part(element, "lim", depth)))

    def equation_array(self, element: Any, depth: int) -> str:
        rows = self.parts(element, "e", depth)
        parent = element.getparent()
        on_its_own = parent is not None and parent.tag == f"{_M}oMath"
        return ("\n" if on_its_own else "; ").join(rows)

    def matrix(self, element: Any, depth: int) -> str:
        rows = "; ".join(", ".join(self.parts(row, "e", depth))
                         for row in element.iterchildren(f"{_M}mr"))
        holder = element.getparent()
        outer = holder.getparent() if holder is not None else None
        if outer is not None and outer.tag == f"{_M}d":
            return rows  # the delimiter draws the brackets
        return f"[{rows}]"

    def phantom(self, element: Any, depth: int) -> str:
        return self.part(element, "e", depth) if self._shown(element) else ""

    def display(self, element: Any, depth: int) -> str:
        """A displayed equation: each of its equations on a line of its own."""
        return "\n".join(line for line in self.parts(element, "oMath", depth) if line.strip())


_HANDLERS = {
    "f": _Reader.fraction, "sSup": _Reader.superscript, "sSub": _Reader.subscript,
    "sSubSup": _Reader.sub_superscript, "sPre": _Reader.prescript, "rad": _Reader.radical,
    "nary": _Reader.nary, "d": _Reader.delimiter, "func": _Reader.function,
    "acc": _Reader.accent, "bar": _Reader.bar, "groupChr": _Reader.group_character,
    "limLow": _Reader.lower_limit, "limUpp": _Reader.upper_limit,
    "eqArr": _Reader.equation_array, "m": _Reader.matrix, "phant": _Reader.phantom,
    "oMathPara": _Reader.display,
}
"""The structures read by their own rule; any other math element is its content in order."""
