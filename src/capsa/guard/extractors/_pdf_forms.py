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
invisible, hidden or no-view, in an optional content group (a layer) the
document turns off, or drawn in no area of the page (no width or height,
or outside the part of the page a viewer shows, its crop box within its
media box), and password fields, whose value a viewer draws as dots (all
counted in the note); empty fields, boxes that are off, push buttons
(their captions are the form's interface), and comments (sticky notes,
highlights' pop-ups: beside the page, as Word's comments are). An
annotation the page lists twice is read once. XFA forms, which draw their
fields from XML no PDF viewer but Adobe's reads, are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["PageFields", "page_fields"]

_HIDDEN_FLAGS = 1 | 2 | 32
"""Annotation flags Invisible, Hidden and NoView (PDF 32000 §12.5.3)."""
_PUSH_BUTTON = 1 << 16
_PASSWORD = 1 << 13
"""A text field's Password flag (bit 14): its value is drawn as dots or asterisks."""
_MAX_VALUE = 2_000
"""Characters of one value kept; a longer one is cut with an ellipsis."""
_MAX_CHAIN = 32
"""Parents followed for a field's name and inherited value."""
_MAX_EXPRESSION = 32
"""Levels of an optional content visibility expression followed; deeper is taken as off."""


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
    box = _page_area(page)
    layers = _Layers(page)
    regenerated = _regenerated(page)
    for reference in _annotations(page):
        try:
            annotation = reference.get_object()
            said = _said(annotation)
            if said is None:
                continue
            rectangle = _rectangle(annotation.get("/Rect"))
            shown = not (_flag(annotation, "/F") & _HIDDEN_FLAGS) and _visible(
                rectangle, box) and not _masked(annotation) and layers.shows(
                    annotation.get("/OC")) and (regenerated or _appears(annotation))
        except Exception:  # noqa: BLE001 - a broken annotation is one value lost, not the page
            continue
        if not shown:
            hidden += 1
            continue
        left, _, _, top = rectangle or (0.0, 0.0, 0.0, 0.0)
        found.append((-top, left, said))
    if not found:
        return PageFields(hidden=hidden)
    found.sort(key=lambda item: (item[0], item[1]))
    return PageFields("Form fields: " + "; ".join(said for _, _, said in found) + ".",
                      len(found), hidden)


_SHOWS = re.compile(rb"(?<![A-Za-z*])(?:Tj|TJ)(?![A-Za-z*])|['\"]")
"""A content operator that shows a string: ``Tj``, ``TJ``, ``'`` or ``"``."""
_PAINTS = re.compile(rb"/([^\s/\[\]()<>{}%]+)\s+Do(?![A-Za-z*])")
"""An XObject painted by name (``/Fm1 Do``)."""
_MAX_APPEARANCE = 1 << 20
"""Bytes of appearance streams searched; past them, the appearance is taken as drawing."""
_MAX_NESTING = 8
"""Form XObjects followed inside an appearance; deeper is taken as drawing."""


def _regenerated(page: Any) -> bool:
    """Whether the form asks viewers to draw its fields from their values
    (``/AcroForm /NeedAppearances true``), so no stored appearance hides one. Only the
    boolean true asks: pypdf's boolean objects are truthy whatever their value, and a
    string or a name is no boolean."""
    try:
        form = _resolved(page.pdf.root_object.get("/AcroForm") or {})
        flag = _resolved(form.get("/NeedAppearances"))
    except Exception:  # noqa: BLE001 - an unreadable form dictionary asks for nothing
        return False
    return getattr(flag, "value", None) is True or flag is True


def _appears(annotation: Any) -> bool:
    """Whether a viewer drawing the annotation's stored appearance (``/AP /N``) may show text.

    An annotation with no stored appearance is drawn from its value; one whose
    appearance shows no string, in its own stream or in the form XObjects it
    paints, draws nothing of its value (a filled field made invisible that
    way), and is left out. An image it paints may be a picture of the text, so
    counts as drawing; so does what cannot be read, or more than
    `_MAX_APPEARANCE` bytes or `_MAX_NESTING` levels of it.
    """
    appearance = _resolved(annotation.get("/AP"))
    normal = _resolved(appearance.get("/N")) if hasattr(appearance, "get") else None
    if normal is None or not hasattr(normal, "get_data"):
        return True  # none, or one per state (a check box's): drawn from the value
    budget = [_MAX_APPEARANCE]
    try:
        return _shows(normal, 0, budget, set())
    except Exception:  # noqa: BLE001 - an undecodable stream: a viewer may still draw it
        return True


def _shows(stream: Any, depth: int, budget: list[int], seen: set[object]) -> bool:
    """Whether the content `stream` shows a string, itself or through the XObjects it
    paints (each followed once); `budget` holds the bytes still to search."""
    if depth > _MAX_NESTING:
        return True
    data = stream.get_data()
    budget[0] -= len(data)
    if budget[0] < 0 or _SHOWS.search(data) is not None:
        return True
    resources = _resolved(stream.get("/Resources"))
    found = _resolved(resources.get("/XObject")) if hasattr(resources, "get") else None
    objects: Any = found if hasattr(found, "get") else {}
    for name in dict.fromkeys(match.group(1) for match in _PAINTS.finditer(data)):
        painted = _resolved(objects.get("/" + name.decode("latin-1")))
        if painted is None or not hasattr(painted, "get_data"):
            return True  # a name the resources do not hold: taken as drawing
        if painted.get("/Subtype") != "/Form":
            return True  # an image: perhaps a picture of the text
        key = _key(painted)
        if key not in seen:
            seen.add(key)
            if _shows(painted, depth + 1, budget, seen):
                return True
    return False


def _annotations(page: Any) -> list[Any]:
    """The page's annotations, each once: a list naming one annotation 100,000 times (one
    kilobyte per 150 names) would otherwise cost 100,000 reads of it, for one value drawn
    in one place."""
    try:
        annotations = page.get("/Annots")
        annotations = annotations.get_object() if annotations is not None else None
    except Exception:  # noqa: BLE001 - an unreadable list is no annotations
        return []
    if not isinstance(annotations, list):
        return []
    seen: set[object] = set()
    unique = []
    for reference in annotations:
        key = _key(reference)
        if key not in seen:
            seen.add(key)
            unique.append(reference)
    return unique


def _key(value: Any) -> object:
    """What identifies a PDF object: its object number where it has one (a reference, or an
    object read through one), else the Python object itself."""
    reference = value if hasattr(value, "idnum") else getattr(value, "indirect_reference", None)
    if reference is not None and hasattr(reference, "idnum"):
        return (reference.idnum, reference.generation)
    return id(value)


def _resolved(value: Any) -> Any:
    return value.get_object() if hasattr(value, "get_object") else value


def _masked(annotation: Any) -> bool:
    """Whether the annotation is a password field, which a viewer draws as dots."""
    return (annotation.get("/Subtype") == "/Widget" and _inherited(annotation, "/FT") == "/Tx"
            and bool(_flag_inherited(annotation, "/Ff") & _PASSWORD))


class _Layers:
    """The document's optional content (layers) as a viewer opens it: its default
    configuration's ``/BaseState``, ``/ON`` and ``/OFF`` (PDF 32000 §8.11.4.3)."""

    def __init__(self, page: Any) -> None:
        self._off: set[object] = set()
        self._on: set[object] = set()
        self._base_off = False
        try:
            catalog = page.pdf.root_object
            default = _resolved(_resolved(catalog.get("/OCProperties") or {}).get("/D") or {})
            self._base_off = default.get("/BaseState") == "/OFF"
            self._off = {_key(group) for group in _resolved(default.get("/OFF") or [])}
            self._on = {_key(group) for group in _resolved(default.get("/ON") or [])}
        except Exception:  # noqa: BLE001 - no readable configuration: every group is on
            pass

    def shows(self, content: Any, depth: int = 0) -> bool:
        """Whether an annotation whose ``/OC`` is `content` (a group, a membership dictionary
        or none) is drawn; what cannot be read is taken as off, which can only leave out."""
        if content is None:
            return True
        if depth > _MAX_EXPRESSION:
            return False
        value = _resolved(content)
        if isinstance(value, list):  # a visibility expression: [/And ...], [/Or ...], [/Not x]
            operator, operands = (value[0], value[1:]) if value else (None, [])
            states = [self.shows(operand, depth + 1) for operand in operands]
            if operator == "/And" and states:
                return all(states)
            if operator == "/Or" and states:
                return any(states)
            return operator == "/Not" and len(states) == 1 and not states[0]
        if not hasattr(value, "get"):
            return False
        if value.get("/Type") != "/OCMD":
            return self._group_on(content)
        if value.get("/VE") is not None:
            return self.shows(value.get("/VE"), depth + 1)
        groups = _resolved(value.get("/OCGs"))
        members = [groups] if hasattr(groups, "get") else list(groups or [])
        states = [self._group_on(group) for group in members]
        if not states:
            return True  # a membership naming no group has no effect
        policy = value.get("/P") or "/AnyOn"
        return {"/AllOn": all(states), "/AnyOff": not all(states),
                "/AllOff": not any(states)}.get(str(policy), any(states))

    def _group_on(self, group: Any) -> bool:
        key = _key(group)
        return key in self._on if self._base_off else key not in self._off


def _page_area(page: Any) -> tuple[float, float, float, float] | None:
    """The part of the page a viewer shows: its crop box within its media box."""
    media = _rectangle(_resolved(page.get("/MediaBox")))
    crop = _rectangle(_resolved(page.get("/CropBox")))
    if media is None or crop is None:
        return media or crop
    return (max(media[0], crop[0]), max(media[1], crop[1]), min(media[2], crop[2]),
            min(media[3], crop[3]))


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
