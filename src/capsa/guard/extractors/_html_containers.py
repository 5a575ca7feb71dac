"""HTML containers whose text a reader sees and unstructured drops, opened for it.

unstructured 0.27's HTML partitioner maps some elements to classes that
drop everything inside them, as likely boilerplate. Four of them hold the
text of the page itself, and a reader sees it:

- ``<form>``: ASP.NET Web Forms, and many shop and government sites, wrap
  the whole page in one; such a page read as nothing at all;
- ``<details>`` and its ``<summary>``: an FAQ's questions and answers, a
  documentation page's collapsed sections (the summary is always shown, the
  rest one click away, as a hidden slide's text is);
- ``<figure>``: a figure's caption and anything else in it;
- ``<dialog open>``: a dialog shown when the page opens (a closed
  ``<dialog>`` is hidden by the browser's own style sheet and stays out).

A closed ``<details>`` is read whole, with a note (`closed_details` counts
them), as a hidden slide's or sheet's text is kept and named.

`open_containers` renames each of these to ``div`` in the tree libxml2 has
just parsed, before unstructured reads it, so their content reads as a
``div``'s does. The form controls inside a form (``input``, ``button``,
``label``, ``select``, ``textarea``) stay as unstructured reads them: out,
as interface rather than text; so does ``<nav>``, a site's menu. Runs
after the hidden elements are taken out (`capsa.guard.extractors._html_hidden`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPENED", "closed_details", "open_containers"]

OPENED = frozenset({"form", "details", "summary", "figure"})
"""Elements always opened; ``dialog`` is opened when it has the ``open`` attribute."""


def open_containers(root: Any) -> int:
    """Rename the containers a reader sees into (see the module docstring) to ``div``;
    returns how many were renamed."""
    if root is None:
        return 0
    found = [element for element in root.iter("form", "details", "summary", "figure", "dialog")
             if element.tag != "dialog" or element.get("open") is not None]
    for element in found:
        element.tag = "div"
    return len(found)



def closed_details(root: Any) -> int:
    """How many ``<details>`` without ``open`` hold text beyond their summary: read whole,
    and named in a note, since a reader sees that text only once it is unfolded."""
    if root is None:
        return 0
    return sum(1 for details in root.iter("details")
               if details.get("open") is None and _folded_text(details))


def _folded_text(details: Any) -> bool:
    """Whether `details` holds text outside its summary."""
    if (details.text or "").strip():
        return True
    for child in details:
        if (child.tail or "").strip():
            return True
        if (isinstance(child.tag, str) and child.tag != "summary"
                and any(piece.strip() for piece in child.itertext())):
            return True
    return False
