"""EPUB chapters without the elements they declare hidden, before pandoc reads them.

unstructured reads an EPUB by having pandoc convert it to HTML, and pandoc keeps
attributes only on ``div``, ``span``, ``section`` and the like: a ``<p hidden>``,
or a ``<p>``, ``<li>``, ``<em>`` or ``<blockquote>`` whose inline style says
``display: none``, reaches that HTML as a plain element, and its text reaches the
model while no reader of the book sees it. So each chapter pandoc will read is
parsed here as the XML it is (as a reading system parses it), the elements it
hides are removed by the one rule capsa reads HTML with
(`capsa.guard.extractors._html_hidden`), and pandoc is handed the book with those
chapters rewritten.

Which chapters: pandoc reads the spine of the package document that
``META-INF/container.xml`` names, and only the spine items whose media type is
``application/xhtml+xml``. Here every spine item of every package document named
there whose media type mentions ``html`` is read, a superset. Nothing else in the
zip changes, the ``mimetype`` member stays first and stored, and a book with
nothing hidden is handed over as the very same bytes. A container or package
document that is not well-formed XML is refused as ``corrupt``: capsa could not
tell which chapters pandoc reads. A spine item whose member is missing is left
to pandoc, which refuses the book.

Bounds: every member is read through the inspected archive (`open_inspected`),
which never inflates a member past the size the inspection checked, so nothing
here decompresses more than was checked; XML is parsed without loading a DTD,
without expanding entities and without the network (the entity scan has already
refused any ``<!ENTITY``). Writing a chapter out again can lengthen it (``>``
becomes ``&gt;``), so a rewritten book whose members hold more than the limit's
``max_uncompressed_bytes`` is refused as ``archive_too_large``.

A chapter that is not well-formed XML: a reading system shows an error for it,
pandoc reads it leniently, as HTML. capsa reads it as HTML too (libxml2, as
unstructured reads HTML). With no element hidden by the rule it goes to pandoc
unchanged; with one, the book is refused as ``corrupt``, since which of its words
pandoc would keep cannot be pruned reliably; nested past the HTML parser's depth
limit, it is refused as ``nested_too_deep``.
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from capsa.guard.extractors._floors import refuse
from capsa.guard.extractors._html_hidden import drop_hidden
from capsa.guard.extractors._rezip import read_member, rezipped

__all__ = ["PrunedBook", "drop_hidden_chapters"]

_CONTAINER = "META-INF/container.xml"


@dataclass(frozen=True, slots=True)
class PrunedBook:
    """An EPUB as pandoc should read it, and how many hidden elements were taken out."""

    payload: bytes
    """The book to hand pandoc: the payload itself when nothing was removed."""
    removed: int
    """Elements removed (outermost only), over every chapter pandoc reads."""


def drop_hidden_chapters(payload: bytes, archive: zipfile.ZipFile, *,
                         max_bytes: int) -> PrunedBook:
    """Remove the elements each chapter declares hidden; return the book pandoc should read.

    Args:
        payload: the EPUB's bytes, already inspected.
        archive: `payload` opened through `capsa.guard.archive.open_inspected`.
        max_bytes: the most a rewritten book's members may hold, uncompressed
            (``max_uncompressed_bytes``).

    Raises:
        IngestionRejected: ``corrupt`` (a container or package document, or a chapter
            with hidden elements, that is not well-formed XML), ``nested_too_deep``,
            ``archive_too_large`` (the rewritten book).
    """
    rewritten: dict[str, bytes] = {}
    removed = 0
    for name in _chapters(archive):
        data = read_member(archive, name)
        tree = _parse_chapter(data, name)
        if tree is None:
            continue  # not XML, and nothing in it hidden: pandoc reads it as it is
        gone = drop_hidden(tree.getroot())
        if gone:
            from lxml import etree

            rewritten[name] = etree.tostring(tree, encoding="utf-8", xml_declaration=True)
            removed += gone
    if not rewritten:
        return PrunedBook(payload=payload, removed=0)
    return PrunedBook(payload=rezipped(archive, rewritten, max_bytes=max_bytes),
                      removed=removed)


def _chapters(archive: zipfile.ZipFile) -> list[str]:
    """The members pandoc reads as chapters (a superset), each once, in spine order."""
    names = set(archive.namelist())
    found: dict[str, None] = {}
    if _CONTAINER not in names:
        return []  # pandoc refuses a book without one
    container = _parse_package(read_member(archive, _CONTAINER), _CONTAINER)
    for rootfile in _elements(container, "rootfile"):
        package = rootfile.get("full-path")
        if not package or package not in names:
            continue
        opf = _parse_package(read_member(archive, package), package)
        items: dict[str, list[tuple[str, str]]] = {}
        for item in _elements(opf, "item"):
            items.setdefault(item.get("id") or "", []).append(
                (item.get("href") or "", (item.get("media-type") or "").lower()))
        for itemref in _elements(opf, "itemref"):
            for href, media_type in items.get(itemref.get("idref") or "", []):
                member = posixpath.normpath(posixpath.join(
                    posixpath.dirname(package), unquote(href.partition("#")[0])))
                if "html" in media_type and member in names:
                    found[member] = None
    return list(found)


def _elements(tree: Any, local_name: str) -> Iterator[Any]:
    """Every element named `local_name`, in any namespace (pandoc does not check it)."""
    for element in tree.iter():
        if isinstance(element.tag, str) and element.tag.rpartition("}")[2] == local_name:
            yield element


def _xml_parser() -> Any:
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           huge_tree=False)


def _parse_package(data: bytes, name: str) -> Any:
    from lxml import etree

    try:
        return etree.fromstring(data, _xml_parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        raise refuse("corrupt", f"{name!r} is not well-formed XML ({exc}); capsa cannot tell "
                                "which chapters the book holds") from None


def _parse_chapter(data: bytes, name: str) -> Any:
    """The chapter as a reading system parses it; None when it is not well-formed XML but
    no element in it is hidden by the rule (read as HTML)."""
    from lxml import etree

    try:
        return etree.fromstring(data, _xml_parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        problem = str(exc)
    parser = etree.HTMLParser(no_network=True)
    root = etree.fromstring(data, parser)
    for error in parser.error_log:
        if error.type_name == "ERR_RESOURCE_LIMIT":
            raise refuse("nested_too_deep", f"chapter {name!r} nests deeper than the HTML "
                                            "parser's limit of 256 levels; its text would be "
                                            "cut there")
    if root is not None and drop_hidden(root):
        raise refuse("corrupt", f"chapter {name!r} is not well-formed XML ({problem}) and "
                                "marks elements hidden; capsa cannot tell which words pandoc "
                                "would keep")
    return None
