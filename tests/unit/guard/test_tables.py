"""Every cell of a table survives capsa, whatever its merges: compared with the raw parser.

capsa writes a table as rows of tab-separated cells, read from unstructured's
``text_as_html``. That HTML comes from a second walk of the table, which lost
cells where merged cells did not line up with the grid
(``grid_offset_error.docx`` came out ``A\\tMerged B1-B3`` without ``C``).
Each test builds a table in code, in each format unstructured reads tables
from, and checks that capsa's text holds every word of the raw parser's
text, no more and no fewer.
"""

from __future__ import annotations

import copy
import io
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.extractors.unstructured import _partitioner

docx = pytest.importorskip("docx")
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _saved(document: object) -> bytes:
    out = io.BytesIO()
    document.save(out)  # type: ignore[attr-defined]
    return out.getvalue()


def docx_merged_columns() -> bytes:
    document = docx.Document()
    table = document.add_table(rows=2, cols=5)
    cells = table.rows[0].cells
    cells[0].text = "A"
    cells[1].merge(cells[3]).text = "Merged B1-B3"
    cells[4].text = "C"
    for number, cell in enumerate(table.rows[1].cells):
        cell.text = f"r2c{number}"
    return _saved(document)


def docx_merged_rows() -> bytes:
    document = docx.Document()
    table = document.add_table(rows=3, cols=3)
    table.cell(0, 0).merge(table.cell(2, 0)).text = "Tall"
    for row in range(3):
        for column in (1, 2):
            table.cell(row, column).text = f"r{row}c{column}"
    return _saved(document)


def docx_grid_offset() -> bytes:
    """A row whose cell continues a vertical merge where the row above has no cell start:
    python-docx raises on that row, and unstructured's HTML lost it (the issue's fault)."""
    from docx.oxml import OxmlElement

    document = docx.Document()
    table = document.add_table(rows=2, cols=4)
    top = table.rows[0].cells
    top[0].text = "A"
    top[1].merge(top[3]).text = "Merged B1-B3"
    bottom = table.rows[1].cells
    bottom[0].merge(bottom[1]).text = "C"
    table.rows[1]._tr.tc_lst[1].get_or_add_tcPr().append(OxmlElement("w:vMerge"))
    return _saved(document)


def docx_nested() -> bytes:
    document = docx.Document()
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "outer"
    inner = table.cell(0, 1).add_table(rows=2, cols=2)
    for row in range(2):
        for column in range(2):
            inner.cell(row, column).text = f"inner{row}{column}"
    table.cell(1, 0).text = "below"
    table.cell(1, 1).text = "right"
    return _saved(document)


def docx_extra_cell_past_the_grid() -> bytes:
    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    for number, cell in enumerate(table.rows[0].cells):
        cell.text = f"head{number}"
    row = table.rows[1]._tr
    extra = copy.deepcopy(row.tc_lst[0])
    for node in extra.iter(f"{W}t"):
        node.text = "beyond"
    row.append(extra)
    table.rows[1].cells[0].text = "first"
    return _saved(document)


def xlsx_merged() -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["A", "Merged B1-B3", None, None, "C"])
    sheet.append(["Tall", "x1", "x2", "x3", "x4"])
    sheet.append([None, "y1", "y2", "y3", "y4"])
    sheet.merge_cells("B1:D1")
    sheet.merge_cells("A2:A3")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pptx_merged() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    table = slide.shapes.add_table(3, 4, Inches(0.5), Inches(1.5), Inches(8), Inches(2)).table
    for row in range(3):
        for column in range(4):
            table.cell(row, column).text = f"p{row}{column}"
    table.cell(0, 1).merge(table.cell(0, 3))
    table.cell(0, 1).text = "Merged B1-B3"
    table.cell(1, 0).merge(table.cell(2, 0))
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def html(body: str) -> bytes:
    return f"<html><body><p>Before.</p>{body}<p>After.</p></body></html>".encode()


HTML_COLSPAN = html("<table><tr><td>A</td><td colspan='3'>Merged B1-B3</td><td>C</td></tr>"
                    "<tr><td>1</td><td>2</td><td>3</td><td>4</td><td>5</td></tr></table>")
HTML_ROWSPAN = html("<table><tr><td rowspan='2'>Tall</td><td>r0</td></tr>"
                    "<tr><td>r1</td></tr><tr><td>low</td><td>r2</td></tr></table>")
HTML_NESTED = html("<table><tr><td>outer</td><td><table><tr><td>in1</td><td>in2</td></tr>"
                   "</table></td></tr><tr><td>below</td><td>right</td></tr></table>")
HTML_SECTIONS = html("<table><thead><tr><th>Head</th><th>Two</th></tr></thead><tbody>"
                     "<tr><td>body</td><td>cell</td></tr></tbody><tfoot><tr><td>foot</td>"
                     "<td>note</td></tr></tfoot></table>")

CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "docx-merged-columns": ("docx", docx_merged_columns),
    "docx-merged-rows": ("docx", docx_merged_rows),
    "docx-grid-offset": ("docx", docx_grid_offset),
    "docx-nested": ("docx", docx_nested),
    "docx-cell-past-the-grid": ("docx", docx_extra_cell_past_the_grid),
    "xlsx-merged": ("xlsx", xlsx_merged),
    "pptx-merged": ("pptx", pptx_merged),
    "html-colspan": ("html", lambda: HTML_COLSPAN),
    "html-rowspan": ("html", lambda: HTML_ROWSPAN),
    "html-nested": ("html", lambda: HTML_NESTED),
    "html-sections": ("html", lambda: HTML_SECTIONS),
}


def raw_words(kind: str, payload: bytes) -> Counter[str]:
    return Counter(" ".join(str(element) for element in _partitioner(kind)(payload)).split())


@pytest.mark.parametrize("case", sorted(CASES))
def test_table_text_holds_every_word_the_raw_parser_found(case: str) -> None:
    kind, make = CASES[case]
    payload = make()

    parsed = UnstructuredExtractor().extract(kind, None, payload, max_pages=20)

    assert Counter(parsed.text.split()) == raw_words(kind, payload)


def test_grid_offset_table_keeps_its_last_cell_and_says_its_rows_were_lost() -> None:
    parsed = UnstructuredExtractor().extract("docx", None, docx_grid_offset(), max_pages=20)

    assert parsed.text == "A Merged B1-B3 C"
    assert parsed.notes == ("1 table(s) kept as the parser's flat text: its HTML of them lost "
                            "cells (merged or malformed cells)",)


def test_a_table_whose_html_is_whole_keeps_rows_and_cells() -> None:
    parsed = UnstructuredExtractor().extract("html", None, HTML_COLSPAN, max_pages=20)

    assert "A\tMerged B1-B3\tC\n1\t2\t3\t4\t5" in parsed.text
    assert [e.category for e in parsed.elements][1] == "Table"


words = st.text(alphabet="abcxyz", min_size=1, max_size=5)
spans = st.integers(min_value=1, max_value=3)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(words, spans, spans), min_size=1, max_size=4),
                min_size=1, max_size=4))
def test_html_tables_of_any_spans_keep_every_word(rows: list[list[tuple[str, int, int]]]
                                                  ) -> None:
    body = "".join("<tr>" + "".join(f"<td colspan='{c}' rowspan='{r}'>{w}</td>"
                                    for w, c, r in row) + "</tr>" for row in rows)
    payload = html(f"<table>{body}</table>")

    parsed = UnstructuredExtractor().extract("html", None, payload, max_pages=20)

    assert Counter(parsed.text.split()) == raw_words("html", payload)
