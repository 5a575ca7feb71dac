"""Which elements a page declares hidden by their own attributes, and taking them out.

One rule, used wherever capsa reads HTML or XHTML: HTML files, HTML e-mail bodies
(through unstructured's parse, `capsa.guard.extractors.unstructured`) and EPUB
chapters (before pandoc reads them, `capsa.guard.extractors._epub_hidden`).

A browser shows nothing of an element with the ``hidden`` attribute or an
inline ``display: none``, nor the text of one with ``visibility: hidden`` or
``collapse``; text put there reaches the model while no reader of the page
sees it, the way an instruction hides in a web page or an e-mail. The inline
style is read as a browser's CSS parser reads it, because every difference is
either a bypass (the browser hides what capsa keeps) or a loss:

- comments dropped and escapes resolved (``di\\73 play``);
- a declaration whose value the property does not accept is dropped, so an
  earlier one stands (``display: none; display: nonsense`` hides); where a
  browser might accept a value capsa does not know, capsa drops it too,
  which can only hide more;
- the last declaration wins unless an earlier one is ``!important``;
- custom properties (``--h: none; display: var(--h)``) are inherited and
  substituted, fallbacks included; a ``var()`` that resolves to nothing
  valid leaves the property unset, as the browser does;
- ``visibility`` is inherited and a descendant may set it back to
  ``visible``: that descendant's text is kept, the rest of the hidden
  element's text goes.

Hiding by a style sheet's class or selector is not seen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["drop_hidden", "remove_keeping_tail"]

_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.DOTALL)
_IMPORTANT = re.compile(r"!\s*important\s*\Z", re.IGNORECASE)
_VAR = re.compile(r"var\(", re.IGNORECASE)
_CSS_WIDE = frozenset({"inherit", "initial", "unset", "revert", "revert-layer"})
_DISPLAY_ALONE = frozenset({
    "none", "contents", "block", "inline", "flow-root", "inline-block", "table",
    "inline-table", "flex", "inline-flex", "grid", "inline-grid", "list-item", "ruby",
    "ruby-base", "ruby-text", "ruby-base-container", "ruby-text-container",
    "table-row-group", "table-header-group", "table-footer-group", "table-row",
    "table-cell", "table-column-group", "table-column", "table-caption", "math",
    "-webkit-box", "-webkit-inline-box"})
"""One-word ``display`` values every current browser accepts. A value left out here
(``run-in``, ``-moz-box``) is taken as invalid: an earlier ``none`` then stands, which
can only hide text a browser shows, never show text it hides."""
_OUTSIDE = frozenset({"block", "inline"})
_INSIDE = frozenset({"flow", "flow-root", "table", "flex", "grid", "ruby"})
_VISIBILITY = frozenset({"visible", "hidden", "collapse"})
_MAX_VALUE = 1_000
"""Characters a substituted value may reach before it counts as invalid: no valid
``display`` or ``visibility`` comes near, and nested ``var()`` cannot grow without end."""
_MAX_DEPTH = 32
"""Nested ``var()`` substitutions followed before the value counts as invalid."""


@dataclass(frozen=True, slots=True)
class _Style:
    """An element's inline ``display`` and ``visibility`` (None when not declared) and the
    custom properties it declares, before ``var()`` is substituted."""

    display: str | None = None
    visibility: str | None = None
    custom: Mapping[str, str] | None = None


_NO_STYLE = _Style()


def drop_hidden(root: Any) -> int:
    """Remove what a page declares hidden; returns how many elements (outermost only).

    An element with ``display: none`` (or the ``hidden`` attribute) goes whole;
    the text after it (its ``tail``) is its parent's and stays. An element whose
    visibility is hidden goes whole too, unless a descendant sets ``visibility:
    visible``: then only the hidden text goes and the visible descendant stays.
    A hidden root leaves an empty page. ``hidden="until-found"`` is kept: a
    browser's find-in-page shows it.
    """
    if root is None:
        return 0
    gone = 0
    invisible_roots: list[Any] = []
    visible_again: set[Any] = set()  # visible, under an invisible parent
    holding: set[Any] = set()  # ancestors of those
    stack: list[tuple[Any, Mapping[str, str], bool]] = [(root, {}, False)]
    while stack:
        element, inherited, invisible = stack.pop()
        style = _style_of(element) if isinstance(element.tag, str) else _NO_STYLE
        custom = _resolved_custom(inherited, style.custom)
        if isinstance(element.tag, str) and _display_none(element, style, custom):
            _remove_whole(element, root)
            gone += 1
            continue
        now = _visibility(style, custom, inherited=invisible)
        if now and not invisible:
            invisible_roots.append(element)
        elif invisible and not now:
            visible_again.add(element)
            for ancestor in element.iterancestors():
                if ancestor in holding:
                    break
                holding.add(ancestor)
        stack.extend((child, custom, now) for child in reversed(element))
    for element in invisible_roots:
        gone += 1
        if element in holding:
            _keep_only_shown(element, visible_again, holding)
        else:
            _remove_whole(element, root)
    return gone


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


# -- reading an inline style ------------------------------------------------------------


def _style_of(element: Any) -> _Style:
    """`element`'s inline declarations that decide whether it is shown, as CSS parses them."""
    style = element.get("style")
    if not style:
        return _NO_STYLE
    declared: dict[str, tuple[str, bool]] = {}
    for declaration in _CSS_ESCAPE.sub(_unescaped, _CSS_COMMENT.sub("", style)).split(";"):
        name, colon, value = declaration.partition(":")
        name, value = name.strip(), " ".join(value.split())
        if not colon:
            continue
        important = _IMPORTANT.search(value) is not None
        if important:
            value = _IMPORTANT.sub("", value).rstrip()
        if not name.startswith("--"):
            # var()'s names keep their case: the value is lowered once substituted
            name, value = name.lower(), _VAR.sub("var(", value) if _VAR.search(value) else \
                value.lower()
            if name not in ("display", "visibility"):
                continue
            if "var(" not in value and not _accepts(name, value):
                continue  # dropped by the parser: an earlier declaration stands
        if important or not declared.get(name, ("", False))[1]:
            declared[name] = (value, important)
    if not declared:
        return _NO_STYLE
    custom = {name: value for name, (value, _) in declared.items() if name.startswith("--")}
    return _Style(declared.get("display", (None, False))[0],
                  declared.get("visibility", (None, False))[0], custom or None)


def _unescaped(match: re.Match[str]) -> str:
    if match.group(1) is None:
        return match.group(2)
    code = int(match.group(1), 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def _accepts(name: str, value: str) -> bool:
    """Whether `value` (lower case, spaces collapsed) is one every browser accepts for
    `name` (``display`` or ``visibility``)."""
    if value in _CSS_WIDE:
        return True
    if name == "visibility":
        return value in _VISIBILITY
    if value in _DISPLAY_ALONE:
        return True
    words = value.split(" ")
    if len(set(words)) != len(words) or not 2 <= len(words) <= 3:
        return False
    outside = [w for w in words if w in _OUTSIDE]
    inside = [w for w in words if w in _INSIDE]
    if "list-item" in words:  # [block | inline]? && [flow | flow-root]? && list-item
        rest = len(words) - 1 - len(outside) - len(inside)
        return rest == 0 and len(outside) <= 1 and all(w in ("flow", "flow-root")
                                                       for w in inside)
    return len(words) == 2 and len(outside) == 1 and len(inside) == 1


def _resolved_custom(inherited: Mapping[str, str],
                     declared: Mapping[str, str] | None) -> Mapping[str, str]:
    """The custom properties an element computes: inherited ones, then its own with their
    ``var()`` substituted where declared (an invalid one is as if never declared)."""
    if not declared:
        return inherited
    raw = {**inherited, **declared}
    custom = dict(inherited)
    for name in declared:
        value = _substitute(raw[name], raw, _MAX_DEPTH, frozenset({name}))
        if value is None:
            custom.pop(name, None)
        else:
            custom[name] = value
    return custom


def _substitute(value: str, custom: Mapping[str, str], depth: int,
                using: frozenset[str] = frozenset()) -> str | None:
    """`value` with each ``var(--name[, fallback])`` replaced; None when one names an
    undefined property without a fallback, a cycle, or nests past `depth`."""
    if "var(" not in value:
        return value if len(value) <= _MAX_VALUE else None
    if depth <= 0:
        return None
    out: list[str] = []
    pos = 0
    while (start := value.find("var(", pos)) >= 0:
        end = _closing(value, start + 3)
        if end < 0:
            return None
        name, comma, fallback = value[start + 4:end].partition(",")
        name = name.strip()
        if name in custom and name not in using:
            found = _substitute(custom[name], custom, depth - 1, using | {name})
        else:
            found = None
        if found is None and comma:
            found = _substitute(fallback.strip(), custom, depth - 1, using)
        if found is None:
            return None
        out += (value[pos:start], found)
        pos = end + 1
        if sum(map(len, out)) > _MAX_VALUE:
            return None
    out.append(value[pos:])
    result = "".join(out)
    return result if len(result) <= _MAX_VALUE else None


def _closing(value: str, opening: int) -> int:
    """The offset of the ``)`` that closes the ``(`` at `opening`; -1 when none does."""
    level = 0
    for offset in range(opening, len(value)):
        char = value[offset]
        if char == "(":
            level += 1
        elif char == ")":
            level -= 1
            if level == 0:
                return offset
    return -1


def _computed(name: str, value: str | None, custom: Mapping[str, str]) -> str | None:
    """A declared `value` of `name` with ``var()`` substituted; ``unset`` when that
    leaves nothing valid (invalid at computed-value time)."""
    if value is None or "var(" not in value:
        return value
    resolved = _substitute(value, custom, _MAX_DEPTH)
    if resolved is None:
        return "unset"
    resolved = " ".join(resolved.lower().split())
    return resolved if _accepts(name, resolved) else "unset"


def _display_none(element: Any, style: _Style, custom: Mapping[str, str]) -> bool:
    hidden = element.get("hidden")
    by_attribute = hidden is not None and hidden.lower() != "until-found"
    display = _computed("display", style.display, custom)
    if display is None or display in ("revert", "revert-layer"):
        return by_attribute  # the browser's own style sheet: display none for [hidden]
    return display == "none"


def _visibility(style: _Style, custom: Mapping[str, str], *, inherited: bool) -> bool:
    """Whether the element's own text is invisible, given its parent's (`inherited`)."""
    visibility = _computed("visibility", style.visibility, custom)
    if visibility in ("hidden", "collapse"):
        return True
    if visibility in ("visible", "initial"):
        return False
    return inherited  # not declared, inherit, unset, revert: inherited


# -- taking it out ----------------------------------------------------------------------


def _remove_whole(element: Any, root: Any) -> None:
    if element is root:
        for child in list(root):
            root.remove(child)
        root.text = None
    else:
        remove_keeping_tail(element)


def _keep_only_shown(element: Any, visible_again: set[Any], holding: set[Any]) -> None:
    """Take out the text of an invisible `element` but for its visible descendants.

    Its own text and its children's tails are its text; a child is kept when it
    is visible again, emptied in turn when it holds such a descendant, and
    removed whole otherwise.
    """
    stack = [element]
    while stack:
        current = stack.pop()
        current.text = None
        for child in list(current):
            child.tail = None
            if child in holding and child not in visible_again:
                stack.append(child)
            elif child not in visible_again:
                current.remove(child)
