"""A PDF's filled-in form fields and text boxes, read where the page shows them.

A filled form shows its values on the page: the name typed into an
application, the amount in a tax form, the box ticked beside "I agree". A
viewer draws them from the field's widget annotation, not from the page's
content stream, so pypdf's page text (and every text layer extractor) holds
the printed labels and none of the values: LibreOffice's sample form read
"First Name Last Name" without the "Alice" typed under it, with no word said.
A free-text annotation (a text box a reviewer typed onto the page) is drawn
the same way and lost the same way.

`page_fields` reads them from a page's annotations: each widget with a value
as ``name: value`` (the field's full name, parents' names joined by dots, as
a viewer's form panel lists it; a checkbox or radio button that is on as its
export value, ``gdpr: Yes``), each free-text annotation as its text, in the
order a reader meets them on the page (top to bottom, then left to right).
They are appended to the page's text as one paragraph, ``Form fields: ...``,
with a note. Left out, as a reader never sees them: annotations flagged
invisible, hidden or no-view, or drawn in no area of the page (no width or
height, or off the page; all counted in the note), empty fields, boxes
that are off, push buttons (their captions are the form's interface), and
comments (sticky notes, highlights' pop-ups: beside the page, as Word's
comments are). XFA forms, which draw their fields from XML no PDF viewer
but Adobe's reads, are not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PageFields", "page_fields"]

_HIDDEN_FLAGS = 1 | 2 | 32
"""Annotation flags Invisible, Hidden and NoView (PDF 32000 §12.5.3)."""
_PUSH_BUTTON = 1 << 16
_MAX_VALUE = 2_000
"""Characters of one value kept; a longer one is cut with an ellipsis."""
_MAX_CHAIN = 32
"""Parents followed for a field's name and inherited value."""


@dataclass(frozen=True, slots=True)
class PageFields:
    """What one page's annotations show and hide."""

    text: str = ""
    """The paragraph to append to the page's text (``""`` when nothing is shown)."""
    fields: int = 0
    """Filled fields and free-text annotations read."""
    hidden: int = 0
    """Filled fields and free-text annotations left out because they are not shown."""


def page_fields(page: Any) -> PageFields:
    """The filled form fields and free-text annotations a pypdf `page` shows.

    A broken annotation is skipped, never fails the page.
    """
    found: list[tuple[float, float, str]] = []
    hidden = 0
    box = _rectangle(page.get("/MediaBox"))
    for reference in _annotations(page):
        try:
            annotation = reference.get_object()
            said = _said(annotation)
        except Exception:  # noqa: BLE001 - a broken annotation is one value lost, not the page
            continue
        if said is None:
            continue
        rectangle = _rectangle(annotation.get("/Rect"))
        if _flag(annotation, "/F") & _HIDDEN_FLAGS or not _visible(rectangle, box):
            hidden += 1
            continue
        left, _, _, top = rectangle or (0.0, 0.0, 0.0, 0.0)
        found.append((-top, left, said))
    if not found:
        return PageFields(hidden=hidden)
    found.sort(key=lambda item: (item[0], item[1]))
    return PageFields("Form fields: " + "; ".join(said for _, _, said in found) + ".",
                      len(found), hidden)


def _annotations(page: Any) -> list[Any]:
    try:
        annotations = page.get("/Annots")
        annotations = annotations.get_object() if annotations is not None else None
    except Exception:  # noqa: BLE001 - an unreadable list is no annotations
        return []
    return list(annotations) if isinstance(annotations, list) else []


def _said(annotation: Any) -> str | None:
    """What the annotation shows as text, or None when it shows none."""
    subtype = annotation.get("/Subtype")
    if subtype == "/FreeText":
        return _value_text(annotation.get("/Contents")) or None
    if subtype != "/Widget":
        return None
    kind = _inherited(annotation, "/FT")
    name = _full_name(annotation)
    if kind == "/Btn":
        if _flag_inherited(annotation, "/Ff") & _PUSH_BUTTON:
            return None
        state = annotation.get("/AS")
        if state is None or str(state) == "/Off":
            return None
        value = str(state).lstrip("/")
    elif kind in ("/Tx", "/Ch"):
        value = _value_text(_inherited(annotation, "/V"))
        if not value:
            return None
    else:
        return None
    return f"{name}: {value}" if name else value


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    value = value.get_object() if hasattr(value, "get_object") else value
    if isinstance(value, list):
        text = ", ".join(_value_text(item) for item in value)
    elif hasattr(value, "get_data"):  # a rich-text value stream: its bytes are not shown text
        return ""
    else:
        text = str(value).lstrip("/") if str(value).startswith("/") else str(value)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE - 1] + "\u2026"


def _inherited(annotation: Any, key: str) -> Any:
    """`key` of the widget or of the nearest field above it that has it."""
    node, steps = annotation, 0
    while node is not None and steps < _MAX_CHAIN:
        if key in node:
            return node[key]
        parent = node.get("/Parent")
        node = parent.get_object() if parent is not None else None
        steps += 1
    return None


def _full_name(annotation: Any) -> str:
    names: list[str] = []
    node, steps = annotation, 0
    while node is not None and steps < _MAX_CHAIN:
        partial = node.get("/T")
        if partial is not None:
            names.append(" ".join(str(partial).split()))
        parent = node.get("/Parent")
        node = parent.get_object() if parent is not None else None
        steps += 1
    return ".".join(reversed(names))[:200]


def _flag(annotation: Any, key: str) -> int:
    try:
        return int(annotation.get(key, 0))
    except (TypeError, ValueError):
        return 0


def _flag_inherited(annotation: Any, key: str) -> int:
    value = _inherited(annotation, key)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def _rectangle(value: Any) -> tuple[float, float, float, float] | None:
    """(left, bottom, right, top) of a PDF rectangle, or None when it is not one."""
    try:
        x1, y1, x2, y2 = (float(number) for number in value)
    except Exception:  # noqa: BLE001 - absent, or not four numbers
        return None
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _visible(rectangle: tuple[float, float, float, float] | None,
             page: tuple[float, float, float, float] | None) -> bool:
    """Whether an annotation's rectangle has an area on the page: one of no width or no
    height, or wholly off the page, draws nothing a reader sees."""
    if rectangle is None:
        return False
    left, bottom, right, top = rectangle
    if right - left < 1 or top - bottom < 1:
        return False
    if page is None:
        return True
    return left < page[2] and right > page[0] and bottom < page[3] and top > page[1]
