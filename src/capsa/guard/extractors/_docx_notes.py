"""A Word document's footnotes and endnotes, read after its body and numbered where cited.

A footnote is text a reader sees, at the foot of the page, and in legal and
scholarly writing it carries the authority, the exception or the date the
sentence above depends on. unstructured reads a DOCX's body, tables, headers
and footers and never its notes part, so every footnote was lost without a
word, and the body's reference marks with it (a mark is a field, not text).

`append_notes` writes each note the body cites into the body python-docx has
just parsed, in memory, before unstructured reads it: the reference gets its
number in brackets where it stands (``[1]``), as a reader sees the
superscript, and the notes follow the body in the order they are cited, each
opening with the same number where the note's own mark stands (``[1] See the
Act of 2019.``). Footnotes are
numbered 1, 2, 3 and endnotes i, ii, iii, as Word numbers them by default.
A reference inside a tracked deletion cites nothing; a note cited twice is
written once, under its first number. A note's own content is copied whole,
so the hidden-run rule and the containers' opening reach it as they reach
the body (`capsa.guard.extractors._office_hidden`, which runs this first).

Not read: comments (Word shows them beside the page, not in it) and a
numbering format a document sets for itself (``w:numFmt``; the default is
used).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["Notes", "append_notes"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
_KINDS = (("footnote", "footnotes"), ("endnote", "endnotes"))
_DELETED = (f"{_W}del", f"{_W}moveFrom")
_ROMAN = (("m", 1000), ("cm", 900), ("d", 500), ("cd", 400), ("c", 100), ("xc", 90),
          ("l", 50), ("xl", 40), ("x", 10), ("ix", 9), ("v", 5), ("iv", 4), ("i", 1))
_MAX_NOTES = 10_000
"""Most notes of one kind written out: a crafted file citing one note a million times
writes it once anyway; this bounds distinct notes."""


@dataclass(frozen=True, slots=True)
class Notes:
    """How many notes `append_notes` wrote after the body."""

    footnotes: int = 0
    endnotes: int = 0

    def note(self) -> str | None:
        """The extraction note, or None when the document cites no note."""
        if not self.footnotes and not self.endnotes:
            return None
        return (f"read {self.footnotes} footnote(s) and {self.endnotes} endnote(s) after the "
                "body, each numbered in brackets where the text cites it ([1], [i])")


def append_notes(document: Any) -> Notes:
    """Number the note references of a python-docx `document` and write the notes after it."""
    from docx.oxml import parse_xml

    body = document.element.body
    counts = []
    for kind, part_kind in _KINDS:
        notes = _notes(document, part_kind, kind, parse_xml)
        if not notes:
            counts.append(0)
            continue
        numbers: dict[str, str] = {}
        for reference in list(body.iter(f"{_W}{kind}Reference")):
            if any(True for _ in reference.iterancestors(*_DELETED)):
                continue
            ident = reference.get(f"{_W}id") or ""
            if ident not in notes or (len(numbers) >= _MAX_NOTES and ident not in numbers):
                continue
            number = numbers.setdefault(ident, _label(kind, len(numbers) + 1))
            mark = reference.makeelement(f"{_W}t", {})
            mark.text = f"[{number}]"
            reference.addnext(mark)
        end = body.find(f"{_W}sectPr")
        for ident, number in numbers.items():
            for position, paragraph in enumerate(notes[ident]):
                copied = copy.deepcopy(paragraph)
                if position == 0:
                    _number(copied, kind, f"[{number}]")
                if end is not None:
                    end.addprevious(copied)
                else:
                    body.append(copied)
        counts.append(len(numbers))
    return Notes(*counts)


def _notes(document: Any, part_kind: str, kind: str, parse: Any) -> dict[str, list[Any]]:
    """Each real note's block elements by id (separators and continuation notices left out)."""
    for rel in document.part.rels.values():
        if rel.is_external or rel.reltype != _RELATIONSHIPS + part_kind:
            continue
        part = rel.target_part
        root = getattr(part, "element", None)
        if root is None:
            root = parse(part.blob)
        found: dict[str, list[Any]] = {}
        for note in root.iterchildren(f"{_W}{kind}"):
            if (note.get(f"{_W}type") or "normal") != "normal":
                continue
            blocks = [child for child in note if child.tag in (f"{_W}p", f"{_W}tbl")]
            found.setdefault(note.get(f"{_W}id") or "", blocks)
        return found
    return {}


def _number(paragraph: Any, kind: str, number: str) -> None:
    """Write `number` where the note's own mark stands (``w:footnoteRef``, which Word shows
    as the number and python-docx reads as nothing), or open the paragraph with it."""
    mark = next(paragraph.iter(f"{_W}{kind}Ref"), None)
    if mark is not None:
        text = mark.makeelement(f"{_W}t", {})
        text.text = number
        mark.addnext(text)
        return
    _open_with(paragraph, f"{number} ")


def _open_with(paragraph: Any, text: str) -> None:
    """Put a run holding `text` first among `paragraph`'s content (after its properties)."""
    run = paragraph.makeelement(f"{_W}r", {})
    value = run.makeelement(f"{_W}t", {"{http://www.w3.org/XML/1998/namespace}space": "preserve"})
    value.text = text
    run.append(value)
    properties = paragraph.find(f"{_W}pPr")
    if properties is not None:
        properties.addnext(run)
    else:
        paragraph.insert(0, run)


def _label(kind: str, number: int) -> str:
    """Word's default number for the `number`-th note: 1, 2, 3 or i, ii, iii."""
    if kind == "footnote":
        return str(number)
    roman = []
    for letters, value in _ROMAN:
        while number >= value:
            roman.append(letters)
            number -= value
    return "".join(roman)
