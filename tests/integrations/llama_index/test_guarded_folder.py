"""The README's folder pattern: every kind of file and a zip bomb, and no unguarded parser runs.

LlamaIndex's own readers (pypdf, docx2txt and the rest behind
`SimpleDirectoryReader`) parse untrusted bytes in the application's process.
This test makes any call into them fail loudly, then reads a folder holding
one file of every kind capsa extracts, a file with an extension no reader
maps, and a zip bomb named like a document, the two ways the docs show:
`CapsaDirectoryReader(folder).load_data()`, and placeholders
(`defer=True`) through an `IngestionPipeline` with `CapsaTransform`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.readers.file import base as file_readers

from capsa.guard.samples import (
    docx_bytes,
    eml_simple,
    epub_book,
    html_page,
    paragraphs_xml,
    pdf_with_text,
    png_with_text,
    pptx_with_slides,
    xlsx_with_cells,
    zip_ratio_bomb,
)
from capsa.llama_index import CapsaDirectoryReader, CapsaTransform

pytestmark = pytest.mark.slow

GOOD: dict[str, bytes] = {
    "report.pdf": pdf_with_text(["Northwind Harbor opens at nine."]),
    "minutes.docx": docx_bytes(paragraphs_xml(["The harbor board met on Monday."])),
    "prices.xlsx": xlsx_with_cells([["item", "price"], ["berth", 40]]),
    "deck.pptx": pptx_with_slides(2),
    "page.html": html_page(["The ferry leaves at noon."]),
    "mail.eml": eml_simple("The crane is fixed."),
    "book.epub": epub_book(),
    "notes.md": b"# Notes\n\nTides are high on Friday.\n",
    "data.csv": b"name,berth\nAurora,4\n",
    "scan.png": png_with_text("HARBOR"),
    "readme.unknownext": b"Plain words in a file no reader maps.\n",
}
BOMB = "quarterly.docx"


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    for name, payload in GOOD.items():
        (tmp_path / name).write_bytes(payload)
    (tmp_path / BOMB).write_bytes(zip_ratio_bomb())
    return tmp_path


@pytest.fixture(autouse=True)
def no_unguarded_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of LlamaIndex's own file readers fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an unguarded LlamaIndex reader was asked to parse a file")

    monkeypatch.setattr(SimpleDirectoryReader, "load_file", staticmethod(refuse))
    monkeypatch.setattr(file_readers, "_try_loading_included_file_formats", refuse)


def test_the_readme_folder_pattern_guards_every_file_and_refuses_the_bomb(inbox: Path) -> None:
    reader = CapsaDirectoryReader(str(inbox))
    documents = reader.load_data()
    names = {d.metadata["file_name"] for d in documents}
    assert {"report.pdf", "minutes.docx", "prices.xlsx", "page.html", "notes.md",
            "readme.unknownext"} <= names
    assert all("capsa_sha256" in d.metadata or "capsa_label" in d.metadata for d in documents)
    refused = {o.label: o for o in reader.omitted}
    assert BOMB in refused
    assert refused[BOMB].stage == "archive"
    assert BOMB not in names


def test_placeholders_through_a_pipeline_are_parsed_by_capsa_alone(inbox: Path) -> None:
    placeholders = CapsaDirectoryReader(str(inbox), defer=True).load_data()
    assert all(not d.text for d in placeholders)  # nothing parsed while reading the folder
    transform = CapsaTransform()
    nodes = IngestionPipeline(transformations=[transform], disable_cache=True).run(
        documents=placeholders)
    names = {n.metadata["file_name"] for n in nodes}
    assert {"report.pdf", "minutes.docx", "notes.md", "readme.unknownext"} <= names
    assert BOMB not in names


def test_the_trap_springs_on_the_unguarded_pattern(inbox: Path) -> None:
    # the pattern the docs no longer show: LlamaIndex's own readers on the same folder
    with pytest.raises(AssertionError, match="unguarded LlamaIndex reader"):
        SimpleDirectoryReader(str(inbox)).load_data()
