"""Files found inside a file (an e-mail's attachments) reach every adapter as documents.

`extract_attachment` returns them nested on the parent; each adapter that
reads one file at a time must flatten them, or they would vanish silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from capsa.guard.extractors import default_router
from capsa.guard.sandbox.pool import IsolatedExtractor

MAIL = Path(__file__).resolve().parents[1] / "realdocs" / "files" / "quarterly-with-attachments.eml"
PARENT = "quarterly-with-attachments.eml"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    with IsolatedExtractor(default_router()) as started:
        yield started


def test_langchain_loader_yields_each_attachment_with_its_parent(pool: IsolatedExtractor) -> None:
    from capsa.langchain import CapsaLoader

    loader = CapsaLoader(MAIL, extractor=pool)
    docs = loader.load()

    labels = [doc.metadata["capsa_label"] for doc in docs]
    assert labels[0] == PARENT
    assert f"{PARENT}/Inspection rules.eml/berths.csv" in labels
    nested = [doc for doc in docs if doc.metadata["capsa_label"] != PARENT]
    assert nested and all(doc.metadata["capsa_parent"].startswith(PARENT) for doc in nested)


def test_llama_index_reader_yields_each_attachment_with_its_parent(
        pool: IsolatedExtractor) -> None:
    from capsa.llama_index import CapsaReader

    docs = CapsaReader(extractor=pool).load_data(MAIL)

    labels = [doc.metadata["capsa_label"] for doc in docs]
    assert labels[0] == PARENT
    assert f"{PARENT}/Inspection rules.eml/berths.csv" in labels
    assert len({doc.id_ for doc in docs}) == len(docs)


def test_a_worksheet_embedded_in_a_report_reaches_both_adapters_as_a_document(
        pool: IsolatedExtractor, tmp_path: Path) -> None:
    from tests.unit.guard.test_office_hidden import paragraph, run
    from tests.unit.guard.test_office_objects import ole_object, report

    from capsa.langchain import CapsaLoader
    from capsa.llama_index import CapsaReader

    path = tmp_path / "report.docx"
    path.write_bytes(report(paragraph(run("Tonnage by berth:")), f"<w:p>{ole_object()}</w:p>"))
    child = "report.docx/Microsoft_Excel_Worksheet.xlsx"

    langchain = CapsaLoader(path, extractor=pool).load()
    llama = CapsaReader(extractor=pool).load_data(path)

    for docs in (langchain, llama):
        by_label = {doc.metadata["capsa_label"]: doc for doc in docs}
        assert list(by_label) == ["report.docx", child]
        assert by_label[child].metadata["capsa_parent"] == "report.docx"
    assert "North\t142" in langchain[1].page_content and "North\t142" in llama[1].text
