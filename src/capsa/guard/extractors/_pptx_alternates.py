"""PowerPoint shapes written twice, for new readers and old: read as PowerPoint shows them.

PowerPoint 2010 and later write a shape that uses a newer feature inside
``mc:AlternateContent``: a ``mc:Choice`` for readers that know the feature
and a ``mc:Fallback`` for those that do not, usually a picture of the shape.
A text box holding an equation is one: its whole text is in the choice, the
equation as ``a14:m``, and the fallback is a picture of it. python-pptx
yields neither branch, so unstructured lost the whole text box without a
word ("Mass-energy equivalence says E=mc² for every body at rest." read as
nothing).

`read_alternates` puts the branch PowerPoint shows in the content's place
(`capsa.guard.extractors._alternates`, by what PowerPoint knows), before the
hidden-shape pass, so a hidden shape inside it is left out like any other
and a chart or diagram inside it is read by its own pass. Each equation (``a14:m``) becomes
a run of its linear text, as Word's do
(`capsa.guard.extractors._docx_math`), with the mathematical italic letters
PowerPoint writes (``𝑚𝑐``) as plain ones, since a search types ``mc``.
Alternates nest; each is resolved once, outermost first, in one pass over
the slide (at most `_MAX_ALTERNATES` a slide; past that they stay unread).
One among a text body's paragraphs or a paragraph's runs is resolved the
same way (`_TEXT_PARENTS`): python-pptx yields neither branch there either.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._alternates import POWERPOINT, resolve
from capsa.guard.extractors._docx_math import linear_text

__all__ = ["Alternates", "read_alternates"]

_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_A14 = "{http://schemas.microsoft.com/office/drawing/2010/main}"
_SHAPE_PARENTS = frozenset({f"{_P}spTree", f"{_P}grpSp"})
_TEXT_PARENTS = frozenset({f"{_P}txBody", f"{_A}txBody", f"{_A}p"})
"""Where an alternate holds text rather than shapes: paragraphs of a text body, or runs
and equations of a paragraph. python-pptx yields neither branch there either, and a
reader of markup compatibility resolves an alternate wherever it stands."""
_RESOLVED_PARENTS = _SHAPE_PARENTS | _TEXT_PARENTS
_MAX_ALTERNATES = 10_000


@dataclass(frozen=True, slots=True)
class Alternates:
    """What `read_alternates` did to one presentation."""

    shapes: int = 0
    """``mc:AlternateContent`` on slides now read as the branch PowerPoint shows."""
    equations: int = 0
    """Equations (``a14:m``) now read as linear text."""

    def __add__(self, other: Alternates) -> Alternates:
        return Alternates(self.shapes + other.shapes, self.equations + other.equations)

    def notes(self) -> tuple[str, ...]:
        """The extraction notes; none when the deck has no alternate content."""
        said = []
        if self.shapes:
            said.append(f"read {self.shapes} shape(s) PowerPoint writes twice, for newer and "
                        "older readers, as PowerPoint shows them (python-pptx reads neither)")
        if self.equations:
            said.append(f"read {self.equations} equation(s) in slides as linear text: a "
                        "fraction as a/b, a power as x^2, an index as x_i, a root as √x")
        return tuple(said)


def read_alternates(presentation: Any) -> Alternates:
    """Put, on each slide of a python-pptx `presentation`, the branch PowerPoint shows in
    place of each alternate content among the shapes, and write its equations as runs."""
    shapes = equations = 0
    done: set[int] = set()
    for slide in presentation.slides:
        element = slide.element
        if id(element) in done:
            continue  # two slide ids naming one slide part: read once
        done.add(id(element))
        tree = element.find(f"{_P}cSld/{_P}spTree")
        if tree is None:
            continue
        shapes += len(resolve(tree, POWERPOINT, where=_resolvable, limit=_MAX_ALTERNATES))
        for math in list(tree.iter(f"{_A14}m")):
            if math.getparent().tag == f"{_A}p" and _write_equation(math):
                equations += 1
    return Alternates(shapes, equations)


def _resolvable(parent: Any) -> bool:
    return parent.tag in _RESOLVED_PARENTS


def _write_equation(math: Any) -> bool:
    """Replace an ``a14:m`` by a DrawingML run holding its linear text; False when empty."""
    text = _plain_letters(linear_text(math))
    if not text.strip():
        return False
    run = math.makeelement(f"{_A}r", {})
    run.append(run.makeelement(f"{_A}rPr", {"lang": "en-US"}))
    shown = run.makeelement(f"{_A}t", {})
    shown.text = text
    run.append(shown)
    run.tail = math.tail
    math.getparent().replace(math, run)
    return True


def _plain_letters(text: str) -> str:
    """Mathematical alphanumeric symbols (``𝑚``, ``𝐱``, ``ℎ``) as the letters and digits
    they style: the style is the equation's typography, the letter is what is searched."""
    return "".join(unicodedata.normalize("NFKC", ch)
                   if "\U0001d400" <= ch <= "\U0001d7ff" or ch == "\u210e" else ch
                   for ch in text)
