"""Which elements a page declares hidden by their own attributes, and taking them out.

One rule, used wherever capsa reads HTML or XHTML: HTML files, HTML e-mail bodies
(through unstructured's parse, `capsa.guard.extractors.unstructured`) and EPUB
chapters (before pandoc reads them, `capsa.guard.extractors._epub_hidden`).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["drop_hidden", "hides", "remove_keeping_tail"]

_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.DOTALL)


def _unescaped(match: re.Match[str]) -> str:
    if match.group(1) is None:
        return match.group(2)
    code = int(match.group(1), 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def hides(element: Any) -> bool:
    """Whether a browser shows nothing of `element`, by its own attributes: the ``hidden``
    attribute (a style sheet's ``display: none``, which its inline style may override), or
    an inline ``display: none`` or ``visibility: hidden`` / ``collapse``.

    The inline style is read as CSS reads it: comments dropped, escapes resolved
    (``di\\73 play``), the last declaration of a property winning unless an earlier one
    is ``!important``.
    """
    hidden = element.get("hidden")
    style = element.get("style")
    display = "none" if hidden is not None and hidden.lower() != "until-found" else None
    visibility = None
    if style:
        declared: dict[str, tuple[str, bool]] = {}
        for declaration in _CSS_ESCAPE.sub(_unescaped, _CSS_COMMENT.sub("", style)).split(";"):
            name, colon, value = declaration.partition(":")
            name, value = name.strip().lower(), " ".join(value.lower().split())
            important = value.endswith("important") and "!" in value
            if important:
                value = value[:value.rindex("!")].strip()
            if colon and name in ("display", "visibility") and (
                    important or not declared.get(name, ("", False))[1]):
                declared[name] = (value, important)
        display = declared.get("display", (display, False))[0]
        visibility = declared.get("visibility", (None, False))[0]
    return display == "none" or visibility in ("hidden", "collapse")


def drop_hidden(root: Any) -> int:
    """Remove the elements a page declares hidden; returns how many (outermost only).

    A browser shows nothing of an element with the ``hidden`` attribute or an
    inline ``display: none`` or ``visibility: hidden`` (`hides`), and text put
    there reaches the model while no reader of the page sees it: the way an
    instruction is hidden in a web page or an e-mail. The text after such an
    element (its ``tail``) is part of its parent and stays; a hidden root leaves
    an empty page. ``hidden="until-found"`` is kept: a browser's find-in-page
    shows it. Hiding by a style sheet's class is not seen.
    """
    if root is None:
        return 0
    if isinstance(root.tag, str) and hides(root):
        for child in list(root):
            root.remove(child)
        root.text = None
        return 1
    doomed = [element for element in root.iter()
              if isinstance(element.tag, str) and hides(element)]
    gone: set[Any] = set()
    for element in doomed:
        parent = element.getparent()
        if parent is None or any(a in gone for a in element.iterancestors()):
            continue
        remove_keeping_tail(element)
        gone.add(element)
    return len(gone)


def remove_keeping_tail(element: Any) -> None:
    """Remove `element` from its parent; the text after it (its tail) is the
    parent's text and stays where it stood."""
    parent = element.getparent()
    if element.tail:
        before = element.getprevious()
        if before is not None:
            before.tail = (before.tail or "") + element.tail
        else:
            parent.text = (parent.text or "") + element.tail
    parent.remove(element)
