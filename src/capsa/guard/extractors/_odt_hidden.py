"""ODT text a reader does not see, taken out of ``content.xml`` before pandoc converts it.

An ``.odt`` reaches unstructured as the DOCX pandoc makes of it, and pandoc
keeps the text of every hidden section, hidden paragraph and hidden character
style, dropping the mark: text put there reaches the model while no reader of
the document sees it. So the document's body is pruned here, in the zip pandoc
is handed, by what LibreOffice 7.4 shows (measured by printing to PDF) and,
where it and the OpenDocument standard disagree, by whichever hides:

- a ``text:section`` with ``text:display="none"``, or ``"condition"`` whatever
  its condition (LibreOffice evaluates it; capsa does not, and hides). A
  ``text:condition`` without ``text:display="condition"`` hides nothing, in the
  standard as in LibreOffice;
- a paragraph or heading holding a ``text:hidden-paragraph`` field whose
  ``text:is-hidden`` is true or which has a condition, whatever the condition
  (LibreOffice evaluates it and ignores ``text:is-hidden``; a condition on a
  variable or a database field depends on values capsa cannot know);
- text whose style says ``text:display="none"`` (or ``"condition"`` with a
  ``text:condition`` other than ``none``, the only value the standard defines;
  LibreOffice shows it) in its ``style:text-properties``: a span's or a link's
  text style, a paragraph's or heading's paragraph style, a table cell's cell
  style, each along its ``style:parent-style-name`` chain and, at its end, the
  family's default style. The nearest element whose style says decides, so a
  span whose style says ``text:display="true"`` shows its text inside a hidden
  paragraph, as in LibreOffice. LibreOffice ignores a hiding default paragraph
  style, and a hiding automatic style on a link (it honours a named one); capsa
  hides both.

``text:hidden-text`` and ``text:conditional-text`` are left alone: pandoc drops
their text whatever the condition (so a hidden-text field's text never reaches
the model, and a conditional text's shown value is lost too, as before).

A document whose ``content.xml`` or ``styles.xml`` is not well-formed XML is
refused as ``corrupt``: LibreOffice refuses it too. A document with nothing
hidden is handed to pandoc as the very same bytes. Members are read through the
inspected archive and parsed without a DTD, entity expansion or the network.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._floors import refuse
from capsa.guard.extractors._html_hidden import remove_keeping_tail
from capsa.guard.extractors._rezip import read_member, rezipped

__all__ = ["PrunedDocument", "drop_hidden_text", "hidden_note"]

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_T, _S, _O, _TB = f"{{{_TEXT}}}", f"{{{_STYLE}}}", f"{{{_OFFICE}}}", f"{{{_TABLE}}}"
_STYLED = {f"{_T}p": (f"{_T}style-name", "paragraph"),
           f"{_T}h": (f"{_T}style-name", "paragraph"),
           f"{_T}span": (f"{_T}style-name", "text"),
           f"{_T}a": (f"{_T}style-name", "text"),
           f"{_TB}table-cell": (f"{_TB}style-name", "table-cell")}
"""The elements whose style can hide their text: the attribute naming it, and its family."""
_PARAGRAPHS = frozenset({f"{_T}p", f"{_T}h"})
_MAX_CHAIN = 64


@dataclass(frozen=True, slots=True)
class PrunedDocument:
    """An ODT as pandoc should read it, and how many hidden parts were taken out."""

    payload: bytes
    """The document to hand pandoc: the payload itself when nothing was removed."""
    removed: int
    """Sections, paragraphs, headings, spans and links whose hidden text was left out."""


def hidden_note(removed: int) -> str:
    """The note on an extraction that left out `removed` hidden parts of an ODT."""
    return (f"left out {removed} part(s) the document marks hidden (a hidden section or "
            "paragraph, or text:display=\"none\" in a style): a reader never sees them")


def drop_hidden_text(payload: bytes, archive: zipfile.ZipFile, *,
                     max_bytes: int) -> PrunedDocument:
    """Take the text a reader does not see out of an ODT's ``content.xml``.

    Args:
        payload: the ODT's bytes, already inspected.
        archive: `payload` opened through `capsa.guard.archive.open_inspected`.
        max_bytes: the most a rewritten document's members may hold, uncompressed
            (``max_uncompressed_bytes``).

    Raises:
        IngestionRejected: ``corrupt`` (``content.xml`` or ``styles.xml`` not
            well-formed XML), ``archive_too_large`` (the rewritten document).
    """
    names = set(archive.namelist())
    if "content.xml" not in names:
        return PrunedDocument(payload=payload, removed=0)  # pandoc refuses it
    content = _parse(read_member(archive, "content.xml"), "content.xml")
    styles = (_parse(read_member(archive, "styles.xml"), "styles.xml")
              if "styles.xml" in names else None)
    pruner = _Pruner(_Styles(content, styles), _hidden_by_fields(content))
    for body in content.getroot().iter(f"{_O}body"):
        pruner.prune(body, hidden=False)
    if not pruner.removed:
        return PrunedDocument(payload=payload, removed=0)
    from lxml import etree

    rewritten = etree.tostring(content, encoding="utf-8", xml_declaration=True)
    return PrunedDocument(payload=rezipped(archive, {"content.xml": rewritten},
                                           max_bytes=max_bytes),
                          removed=pruner.removed)


def _parse(data: bytes, name: str) -> Any:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False)
    try:
        return etree.fromstring(data, parser).getroottree()
    except etree.XMLSyntaxError as exc:
        raise refuse("corrupt", f"{name!r} is not well-formed XML ({exc})") from None


def _says(style: Any) -> bool | None:
    """Whether a style's own text properties hide text (None when they do not say)."""
    for properties in style.iterfind(f"{_S}text-properties"):
        display = properties.get(f"{_T}display")
        if display is None:
            continue
        display = display.strip().lower()
        if display == "none":
            return True
        if display == "condition":  # the only defined condition, "none", hides nothing
            return (properties.get(f"{_T}condition") or "").strip().lower() != "none"
        return False
    return None


class _Styles:
    """Which named and automatic styles hide text, resolved along their parent chains."""

    def __init__(self, content: Any, styles: Any | None) -> None:
        self._automatic: dict[tuple[str, str], Any] = {}
        self._common: dict[tuple[str, str], Any] = {}
        self._defaults: dict[str, Any] = {}
        for tree, holder, table in ((content, "automatic-styles", self._automatic),
                                    (content, "styles", self._common),
                                    (styles, "styles", self._common)):
            if tree is None:
                continue
            for section in tree.getroot().iterfind(f"{_O}{holder}"):
                for style in section.iterfind(f"{_S}style"):
                    key = (style.get(f"{_S}family") or "", style.get(f"{_S}name") or "")
                    table.setdefault(key, style)
                if holder == "styles":
                    for default in section.iterfind(f"{_S}default-style"):
                        self._defaults.setdefault(default.get(f"{_S}family") or "", default)
        self._resolved: dict[tuple[str, str | None], bool | None] = {}

    def hides(self, family: str, name: str | None) -> bool | None:
        """Whether text in style `name` of `family` is hidden; None when no style says.

        An element's style is looked up among the automatic styles first, a
        parent among the named ones first; the family's default style ends every
        chain (and decides for an element with no style).
        """
        key = (family, name)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(family, name)
        return self._resolved[key]

    def _resolve(self, family: str, name: str | None) -> bool | None:
        style = _first(self._automatic, self._common, (family, name)) if name else None
        seen: set[int] = set()
        while style is not None and id(style) not in seen and len(seen) < _MAX_CHAIN:
            seen.add(id(style))
            said = _says(style)
            if said is not None:
                return said
            parent = style.get(f"{_S}parent-style-name")
            style = _first(self._common, self._automatic, (family, parent)) if parent else None
        default = self._defaults.get(family)
        return _says(default) if default is not None else None


def _first(one: dict[tuple[str, str], Any], other: dict[tuple[str, str], Any],
           key: tuple[str, str]) -> Any:
    """The style under `key` in `one`, else in `other`, else None (an element with no
    children is false, so ``or`` would skip it)."""
    found = one.get(key)
    return found if found is not None else other.get(key)


class _Pruner:
    """Walks a document body, removing what it hides and counting where hiding starts."""

    def __init__(self, styles: _Styles, hidden_paragraphs: set[Any]) -> None:
        self.styles = styles
        self.hidden_paragraphs = hidden_paragraphs
        self.removed = 0

    def prune(self, element: Any, *, hidden: bool) -> bool:
        """Prune `element`'s subtree; whether anything of it is still shown.

        `hidden` is what its parent's text is. Text (``text`` and children's
        ``tail``) of a hidden element is cleared, its children that show nothing
        are removed, and the caller removes it when nothing of it is shown.
        """
        if self._hidden_whole(element):
            self.removed += not hidden and _holds_text(element)
            return False
        said = self._style_says(element)
        now = hidden if said is None else said
        starts = now and not hidden  # hiding starts here: counted if it takes out any text
        before = _visible_chars(element) if starts else 0
        if now:
            element.text = None
        for child in list(element):
            shown = isinstance(child.tag, str) and self.prune(child, hidden=now)
            if now:
                child.tail = None
            if not shown and isinstance(child.tag, str):
                remove_keeping_tail(child)
        kept = not now or any(isinstance(child.tag, str) for child in element)
        if starts and (_visible_chars(element) if kept else 0) < before:
            self.removed += 1
        return kept

    def _hidden_whole(self, element: Any) -> bool:
        """A hidden section, or a paragraph a hidden-paragraph field hides."""
        if element.tag == f"{_T}section":
            return (element.get(f"{_T}display") or "").strip().lower() in ("none", "condition")
        return element in self.hidden_paragraphs

    def _style_says(self, element: Any) -> bool | None:
        styled = _STYLED.get(element.tag)
        if styled is None:
            return None
        attribute, family = styled
        name = element.get(attribute)
        if family != "paragraph" and not name:
            return None  # a span without a style is its paragraph's text, a cell its table's
        return self.styles.hides(family, name)


def _hidden_by_fields(content: Any) -> set[Any]:
    """The paragraphs and headings a ``text:hidden-paragraph`` field in them hides: one whose
    ``text:is-hidden`` is true or that has a condition (capsa does not evaluate it)."""
    hidden: set[Any] = set()
    for field in content.getroot().iter(f"{_T}hidden-paragraph"):
        cached = (field.get(f"{_T}is-hidden") or "").strip().lower() == "true"
        if not cached and not (field.get(f"{_T}condition") or "").strip():
            continue
        for ancestor in field.iterancestors():
            if ancestor.tag in _PARAGRAPHS:  # the nearest paragraph holding the field
                hidden.add(ancestor)
                break
    return hidden


def _holds_text(element: Any) -> bool:
    """Whether any text inside `element` (its tail aside) is more than white space."""
    return any(text.strip() for text in element.itertext())


def _visible_chars(element: Any) -> int:
    """The characters inside `element` (its tail aside) that are not white space."""
    return sum(len("".join(text.split())) for text in element.itertext())
