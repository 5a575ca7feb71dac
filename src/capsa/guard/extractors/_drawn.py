"""Text of an object Word or PowerPoint draws from a part of its own, put where it stands.

A chart (`capsa.guard.extractors._office_charts`) and a SmartArt diagram
(`capsa.guard.extractors._office_diagrams`) live in parts of their own: the
drawing holds only a reference (``c:chart``, ``dgm:relIds``) inside an
``a:graphicData``, and unstructured reads none of it. Both are read the
same way, which lives here; each module says how its part reads as text.

In a DOCX the paragraph follows the paragraph the object is anchored in (in
the body, cells, text boxes, headers and footers); in a PPTX it is a text
box laid exactly over the object's graphic frame, right after it in the
slide's shape tree, since unstructured skips graphic frames and reads shapes
top to bottom, left to right (a stable sort, so the text lands where the
object stands, in a group too). The part is the one the library has already
loaded from the inspected package, never an external target; a part the
library keeps as bytes is parsed here with no entity resolved and no
network. An object whose part is missing, external, unparsable or of
another kind is counted as unread; one in a tracked deletion, or in a branch
of an ``mc:AlternateContent`` the application does not draw (a drawing's
second copy for older readers, or whatever else a file puts there), is not
read at all. Each part
is read once however many objects name it: a page of references to one
large chart would otherwise read it again for each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capsa.guard.extractors._alternates import POWERPOINT, WORD, in_unshown_branch
from capsa.guard.extractors._docx_containers import text_parts

__all__ = ["Drawn", "Kind", "docx_paragraph", "place_in_docx", "place_in_pptx"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_DELETED = (f"{_W}del", f"{_W}moveFrom")
_SHAPE_PARENTS = frozenset({f"{_P}spTree", f"{_P}grpSp"})


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of object drawn from its own part."""

    reference: str
    """The tag of the reference in ``a:graphicData`` (``c:chart``, ``dgm:relIds``)."""
    relationship: str
    """Its attribute naming the part (``r:id``, ``r:dm``)."""
    uri: str
    """The ``a:graphicData`` ``uri`` that says the drawing is one."""
    root: str
    """The tag the part's root must have (``c:chartSpace``, ``dgm:dataModel``)."""
    text: Callable[[Any], str]
    """The paragraph the part's root reads as (``""``: nothing to write)."""
    box_name: str
    """The name of the PPTX text box laid over the object."""


@dataclass(frozen=True, slots=True)
class Drawn:
    """What one pass over a document's objects of one kind did."""

    read: int = 0
    """Objects whose text now stands where they do."""
    unread: int = 0
    """Objects left out: their part is missing, external, or not of their kind."""


def place_in_docx(document: Any, kind: Kind) -> Drawn:
    """Write each object of `kind` in a python-docx `document`'s body, headers and footers
    as a paragraph after the paragraph it is anchored in."""
    read = unread = 0
    texts: dict[int, str | None] = {}
    for part, root in text_parts(document):
        last: dict[Any, Any] = {}  # anchor paragraph -> the paragraph written after it
        for reference in list(root.iter(kind.reference)):
            anchor = next(reference.iterancestors(f"{_W}p"), None)
            if (anchor is None or _not_drawn(reference, kind, WORD)
                    or next(reference.iterancestors(*_DELETED), None) is not None):
                continue
            text = _text_of(part, reference.get(kind.relationship), kind, texts)
            if text is None:
                unread += 1
            elif text:
                paragraph = docx_paragraph(anchor, text)
                last.get(anchor, anchor).addnext(paragraph)
                last[anchor] = paragraph
                read += 1
    return Drawn(read, unread)


def place_in_pptx(presentation: Any, kind: Kind) -> Drawn:
    """Lay a text box holding each object's paragraph over each object of `kind` on a
    python-pptx `presentation`'s slides."""
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    read = unread = 0
    done: set[int] = set()
    texts: dict[int, str | None] = {}
    for slide in presentation.slides:
        if id(slide.element) in done:
            continue  # two slide ids naming one slide part: read once
        done.add(id(slide.element))
        frames: list[tuple[Any, Any]] = []
        pending = list(slide.shapes)
        while pending:  # each frame gets its own text box: the order they are found is free
            shape = pending.pop()
            if isinstance(shape, GroupShape):
                pending.extend(shape.shapes)
            elif isinstance(shape, GraphicFrame):
                reference = shape._element.find(f"{_A}graphic/{_A}graphicData/{kind.reference}")
                if reference is not None and not _not_drawn(reference, kind, POWERPOINT):
                    frames.append((shape, reference))
        next_id = _next_shape_id(slide.element) if frames else 0
        for frame, reference in frames:
            element = frame._element
            parent = element.getparent()
            if parent is None or parent.tag not in _SHAPE_PARENTS:
                continue
            text = _text_of(slide.part, reference.get(kind.relationship), kind, texts)
            if text is None:
                unread += 1
            elif text:
                element.addnext(_pptx_text_box(frame, text, next_id, kind.box_name))
                next_id += 1
                read += 1
    return Drawn(read, unread)


def _text_of(part: Any, ident: str | None, kind: Kind, texts: dict[int, str | None]
             ) -> str | None:
    """The paragraph of the part `part` relates as `ident`; None when that part is missing,
    external, unparsable or not of `kind`. Each target part is read once, its paragraph
    kept in `texts` (by the part's identity) for every other object naming it."""
    rel = part.rels.get(ident) if ident else None
    if rel is None or rel.is_external:
        return None
    try:
        target = rel.target_part
    except Exception:  # noqa: BLE001 - a broken relationship is one object lost
        return None
    if id(target) not in texts:
        texts[id(target)] = _read(target, kind)
    return texts[id(target)]


def _read(part: Any, kind: Kind) -> str | None:
    try:
        root = _root(part)
    except Exception:  # noqa: BLE001 - a broken part is one object lost, not the document
        return None
    if root is None or root.tag != kind.root:
        return None
    return kind.text(root)


def _root(part: Any) -> Any:
    """The part's parsed XML: the library's own when it parsed it (python-pptx's chart part),
    else its bytes parsed here (python-docx keeps a chart as bytes), no entity resolved and
    no network, after the DTD scan."""
    element = getattr(part, "_element", None)
    if element is not None:
        return element
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    return etree.fromstring(part.blob, parser)


def _not_drawn(reference: Any, kind: Kind, understood: frozenset[str]) -> bool:
    """Whether the reference is not a drawing's of `kind`, or stands in a branch of an
    ``mc:AlternateContent`` the application (knowing `understood`) does not draw.

    Word and PowerPoint draw the first choice whose requirements they know, else
    the fallback (`capsa.guard.extractors._alternates`); an object in another
    branch is the same object written again for older readers, or text no
    reader sees (a chart behind a choice that shows a picture or a sentence)."""
    data = reference.getparent()
    if data is None or data.tag != f"{_A}graphicData" or data.get("uri") != kind.uri:
        return True
    return in_unshown_branch(reference, understood)


def docx_paragraph(anchor: Any, text: str) -> Any:
    """A ``w:p`` holding `text` in one run, made in `anchor`'s document."""
    paragraph = anchor.makeelement(f"{_W}p", {})
    run = paragraph.makeelement(f"{_W}r", {})
    value = run.makeelement(f"{_W}t", {_XML_SPACE: "preserve"})
    value.text = text
    run.append(value)
    paragraph.append(run)
    return paragraph


def _pptx_text_box(frame: Any, text: str, ident: int, name: str) -> Any:
    """A text box holding `text`, at `frame`'s place and size (as python-pptx reads them,
    a placeholder's inherited from its layout)."""
    from pptx.oxml import parse_xml

    box = parse_xml(
        f'<p:sp xmlns:p="{_P[1:-1]}" xmlns:a="{_A[1:-1]}"><p:nvSpPr>'
        f'<p:cNvPr id="{ident}" name="{name}"/><p:cNvSpPr txBox="1"/><p:nvPr/>'
        '</p:nvSpPr><p:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="0" cy="0"/></a:xfrm>'
        "</p:spPr><p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:t/></a:r></a:p></p:txBody>"
        "</p:sp>")
    offset = box.find(f".//{_A}off")
    extent = box.find(f".//{_A}ext")
    offset.set("x", str(frame.left or 0))
    offset.set("y", str(frame.top or 0))
    extent.set("cx", str(frame.width or 0))
    extent.set("cy", str(frame.height or 0))
    box.find(f".//{_A}t").text = text
    return box


def _next_shape_id(slide: Any) -> int:
    """An id no shape on the slide uses (the largest plus one)."""
    largest = 0
    for properties in slide.iter(f"{_P}cNvPr"):
        try:
            largest = max(largest, int(properties.get("id") or ""))
        except ValueError:
            continue
    return largest + 1
