"""Content an Office file writes twice, for newer readers and older: read as shown.

Office 2010 and later write anything that uses a newer feature inside
``mc:AlternateContent`` (ECMA-376 Part 3, markup compatibility): one or more
``mc:Choice`` elements, each naming in ``Requires`` the namespaces a reader
must know to draw it, then an ``mc:Fallback`` for readers that know none of
them. A reader draws the first choice whose requirements it knows, else the
fallback, else nothing. Word writes a text box so (a drawing, then VML), an
emoji (a symbol extension, then the character), PowerPoint an equation in a
text box (the text, then a picture), Excel its newer charts (the chart, then a
sentence for older versions).

python-docx and python-pptx yield neither branch, so the content was lost
whole, or, where capsa read a branch itself, it took the first. A choice
requiring a namespace no Office application knows is never drawn, and so is
a place to hide words: a file whose first choice is such a one shows its
fallback, and reading the first branch read the hidden words and lost the
shown ones. Each application's own list of what it knows (`WORD`,
`POWERPOINT`, `EXCEL`) decides here, as it decides for the application;
a namespace one of them knows and another does not counts only for its own.

`shown_branch` is that choice; `resolve` puts its content in the
alternate's place throughout a part, so every later pass (hidden text,
containers, charts) sees the document as the application draws it;
`in_unshown_branch` tells whether an element stands in a branch not shown,
for alternates left unresolved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["EXCEL", "POWERPOINT", "WORD", "in_unshown_branch", "resolve", "shown_branch"]

MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_ALTERNATE = f"{MC}AlternateContent"
_BRANCHES = (f"{MC}Choice", f"{MC}Fallback")

_DRAWING = frozenset({
    "http://schemas.openxmlformats.org/drawingml/2006/main",
    "http://schemas.openxmlformats.org/drawingml/2006/chart",
    "http://schemas.openxmlformats.org/drawingml/2006/diagram",
    "http://schemas.openxmlformats.org/drawingml/2006/picture",
    "http://schemas.openxmlformats.org/officeDocument/2006/math",
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "http://schemas.microsoft.com/office/drawing/2007/8/2/chart",       # c14
    "http://schemas.microsoft.com/office/drawing/2008/diagram",         # dsp
    "http://schemas.microsoft.com/office/drawing/2010/main",            # a14
    "http://schemas.microsoft.com/office/drawing/2012/chart",           # c15
    "http://schemas.microsoft.com/office/drawing/2012/main",            # a15
    "http://schemas.microsoft.com/office/drawing/2014/chart",           # c16
    "http://schemas.microsoft.com/office/drawing/2014/main",            # a16
    "http://schemas.microsoft.com/office/drawing/2014/chartex",         # cx
    "http://schemas.microsoft.com/office/drawing/2015/9/8/chartex",     # cx1 ... cx8: the
    "http://schemas.microsoft.com/office/drawing/2015/10/21/chartex",   # newer chart kinds
    "http://schemas.microsoft.com/office/drawing/2016/5/9/chartex",
    "http://schemas.microsoft.com/office/drawing/2016/5/10/chartex",
    "http://schemas.microsoft.com/office/drawing/2016/5/11/chartex",
    "http://schemas.microsoft.com/office/drawing/2016/5/12/chartex",
    "http://schemas.microsoft.com/office/drawing/2016/5/13/chartex",
    "http://schemas.microsoft.com/office/drawing/2016/5/14/chartex",
    "http://schemas.microsoft.com/office/drawing/2016/ink",             # aink
    "http://schemas.microsoft.com/office/drawing/2016/SVG/main",        # asvg
    "http://schemas.microsoft.com/office/drawing/2017/model3d",         # am3d
})
"""DrawingML and its extensions, which Word, PowerPoint and Excel 2016 and later all draw."""

WORD = _DRAWING | {
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "urn:schemas-microsoft-com:vml",
    "urn:schemas-microsoft-com:office:office",
    "urn:schemas-microsoft-com:office:word",
    "http://schemas.microsoft.com/office/word/2006/wordml",              # wne
    "http://schemas.microsoft.com/office/word/2010/wordml",              # w14
    "http://schemas.microsoft.com/office/word/2010/wordprocessingCanvas",  # wpc
    "http://schemas.microsoft.com/office/word/2010/wordprocessingDrawing",  # wp14
    "http://schemas.microsoft.com/office/word/2010/wordprocessingGroup",  # wpg
    "http://schemas.microsoft.com/office/word/2010/wordprocessingInk",   # wpi
    "http://schemas.microsoft.com/office/word/2010/wordprocessingShape",  # wps
    "http://schemas.microsoft.com/office/word/2012/wordml",              # w15
    "http://schemas.microsoft.com/office/word/2015/wordml/symex",        # w16se
    "http://schemas.microsoft.com/office/word/2016/wordml/cid",          # w16cid
    "http://schemas.microsoft.com/office/word/2018/wordml",              # w16
    "http://schemas.microsoft.com/office/word/2018/wordml/cex",          # w16cex
    "http://schemas.microsoft.com/office/word/2020/wordml/sdtdatahash",  # w16sdtdh
}
"""The namespaces Word 2016 and later knows: a choice requiring only these is what it draws."""

POWERPOINT = _DRAWING | {
    "http://schemas.openxmlformats.org/presentationml/2006/main",
    "http://schemas.microsoft.com/office/powerpoint/2010/main",         # p14
    "http://schemas.microsoft.com/office/powerpoint/2012/main",         # p15
    "http://schemas.microsoft.com/office/powerpoint/2015/09/main",      # p159
    "http://schemas.microsoft.com/office/powerpoint/2016/slidezoom",    # pslz
    "http://schemas.microsoft.com/office/powerpoint/2016/sectionzoom",  # psez
    "http://schemas.microsoft.com/office/powerpoint/2017/10/main",      # p1710
}
"""The namespaces PowerPoint 2016 and later knows."""

EXCEL = _DRAWING | {
    "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing",
    "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main",    # x14
    "http://schemas.microsoft.com/office/spreadsheetml/2009/9/ac",      # x14ac
    "http://schemas.microsoft.com/office/spreadsheetml/2010/11/main",   # x15
    "http://schemas.microsoft.com/office/drawing/2010/slicer",          # sle
    "http://schemas.microsoft.com/office/drawing/2012/slicer",          # sle15
    "http://schemas.microsoft.com/office/drawing/2012/timeslicer",      # tsle
}
"""The namespaces Excel 2016 and later knows (a slicer's choice is drawn, its fallback is
a sentence telling older versions they cannot)."""


def shown_branch(alternate: Any, understood: frozenset[str]) -> Any:
    """The branch of `alternate` an application knowing `understood` draws: its first
    choice requiring only namespaces in it, else its fallback (None when neither)."""
    for choice in alternate.iterchildren(f"{MC}Choice"):
        prefixes = (choice.get("Requires") or "").split()
        if prefixes and all(choice.nsmap.get(prefix) in understood for prefix in prefixes):
            return choice
    return alternate.find(f"{MC}Fallback")


def in_unshown_branch(element: Any, understood: frozenset[str]) -> bool:
    """Whether `element` stands, at any level, in a branch of an alternate that an
    application knowing `understood` does not draw."""
    for branch in element.iterancestors(*_BRANCHES):
        alternate = branch.getparent()
        if alternate is None or shown_branch(alternate, understood) is not branch:
            return True
    return False


def resolve(root: Any, understood: frozenset[str], *, where: Callable[[Any], bool],
            limit: int) -> list[list[Any]]:
    """Put, in place of each alternate under `root` whose parent `where` accepts, the
    content of the branch drawn (`shown_branch`); return each one's content as placed.

    Nested alternates are resolved outermost first, in one pass; those inside a branch not
    drawn go with it. At most `limit` are resolved (past that they stay as they are, and
    `in_unshown_branch` still tells which branch a later pass may read).
    """
    found = list(root.iter(_ALTERNATE))[:limit]
    # each branch is chosen before anything moves: a moved choice may lose the namespace
    # declarations its requirements are read by
    shown = [shown_branch(alternate, understood) for alternate in found]
    dropped: set[Any] = set()
    placed: list[list[Any]] = []
    for alternate, branch in zip(found, shown, strict=True):
        parent = alternate.getparent()
        if alternate in dropped or parent is None or not where(parent):
            continue
        content = list(branch) if branch is not None else []
        at = parent.index(alternate)
        parent.remove(alternate)
        for offset, child in enumerate(content):
            parent.insert(at + offset, child)  # lxml moves the element, tail and all
        dropped.update(inner for other in alternate if other is not branch
                       for inner in other.iter(_ALTERNATE))
        placed.append(content)
    return placed
