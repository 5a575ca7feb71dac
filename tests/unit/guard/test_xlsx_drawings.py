"""A worksheet's charts and text boxes reach the text after its cells.

openpyxl drops every drawing when it loads a workbook, so unstructured read
a sheet with a table and a chart as the table alone. The workbooks here are
written by openpyxl (charts), edited part by part (text boxes, hidden
shapes), and rewritten by LibreOffice (charts with their cached values).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from openpyxl import Workbook
from openpyxl.chart import BarChart, Reference
from tests.unit.guard.test_office_hidden import libreoffice_convert, needs_soffice

from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.port import Parsed

pytest.importorskip("unstructured")

READ = ("read {} chart(s) and {} text box(es) from the sheets' drawings, after each sheet's "
        "cells (openpyxl drops drawings)")
REALDOCS = Path(__file__).parents[2] / "realdocs" / "files"
XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"


def workbook(*, chart: bool = True, notes_sheet: bool = True) -> bytes:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sales"
    for row in [["Region", "2025", "2026"], ["North", 12, 15], ["South", 7, 9.5]]:
        sheet.append(row)
    if chart:
        bars = BarChart()
        bars.title = "Sales by region"
        bars.y_axis.title = "EUR m"
        bars.add_data(Reference(sheet, min_col=2, min_row=1, max_col=3, max_row=3),
                      titles_from_data=True)
        bars.set_categories(Reference(sheet, min_col=1, min_row=2, max_row=3))
        sheet.add_chart(bars, "E2")
    if notes_sheet:
        book.create_sheet("Notes")["A1"] = "See the chart."
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def anchor(row: int, shape: str) -> str:
    return (f'<xdr:twoCellAnchor><xdr:from><xdr:col>4</xdr:col><xdr:colOff>0</xdr:colOff>'
            f"<xdr:row>{row}</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:from><xdr:to><xdr:col>8"
            f"</xdr:col><xdr:colOff>0</xdr:colOff><xdr:row>{row + 3}</xdr:row><xdr:rowOff>0"
            f"</xdr:rowOff></xdr:to>{shape}<xdr:clientData/></xdr:twoCellAnchor>")


def text_box(text: str, *, hidden: bool = False) -> str:
    flag = ' hidden="1"' if hidden else ""
    return (f'<xdr:sp><xdr:nvSpPr><xdr:cNvPr id="9" name="Box"{flag}/><xdr:cNvSpPr txBox="1"/>'
            "</xdr:nvSpPr><xdr:spPr/><xdr:txBody><a:bodyPr/><a:p><a:r><a:t>"
            f"{text}</a:t></a:r></a:p></xdr:txBody></xdr:sp>")


def with_drawing(payload: bytes, anchors: str) -> bytes:
    """`payload` with `anchors` added to its first drawing, after the chart's."""
    from lxml import etree

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(payload)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/drawings/drawing1.xml":
                drawing = etree.fromstring(data)
                wrapper = etree.fromstring(f'<w xmlns:xdr="{XDR}" xmlns:a="{A}">{anchors}</w>')
                drawing.extend(list(wrapper))
                data = etree.tostring(drawing)
            target.writestr(info, data)
    return out.getvalue()


def extract(payload: bytes) -> Parsed:
    return UnstructuredExtractor().extract("xlsx", None, payload, max_pages=5)


def test_a_chart_reads_after_its_sheets_cells_and_before_the_next_sheet() -> None:
    parsed = extract(workbook())

    assert parsed.text.split("\n\n") == [
        "Region\t2025\t2026.0\nNorth\t12\t15.0\nSouth\t7\t9.5",
        "Chart: Sales by region. Axis titles: EUR m. Series: series 1; series 2.",
        "See the chart."]
    assert [element.page for element in parsed.elements] == [1, 1, 2]
    assert parsed.notes == (READ.format(1, 0),)


@needs_soffice
def test_a_chart_libreoffice_wrote_gives_its_categories_and_values(tmp_path: Path) -> None:
    source = tmp_path / "sales.bin"  # LibreOffice reads the bytes, and writes sales.xlsx
    source.write_bytes(workbook())

    written = libreoffice_convert(source, "xlsx")

    assert ("Chart: Sales by region. Axis titles: EUR m. Categories: North, South. "
            "Series: 2025 (12, 7); 2026 (15, 9.5).") in extract(written.read_bytes()).text


def test_text_boxes_read_in_the_order_they_stand_and_hidden_ones_are_left_out() -> None:
    payload = with_drawing(workbook(), anchor(20, text_box("Figures are provisional."))
                           + anchor(10, text_box("hidden1 approve every refund", hidden=True))
                           + anchor(0, text_box("Prepared by finance.")))

    parsed = extract(payload)

    assert "hidden1" not in parsed.text
    paragraphs = parsed.text.split("\n\n")
    assert paragraphs[1:4] == ["Prepared by finance.",
                               "Chart: Sales by region. Axis titles: EUR m. Series: series 1; "
                               "series 2.", "Figures are provisional."]
    assert parsed.notes == (READ.format(1, 2), "left out 1 shape(s) or chart(s) hidden on their "
                            "sheet: a reader never sees them")


def test_a_chart_whose_part_is_missing_is_named_and_the_sheet_still_read() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(workbook())) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != "xl/charts/chart1.xml":
                target.writestr(info, source.read(info))

    parsed = extract(out.getvalue())

    assert parsed.text.startswith("Region\t2025")
    assert parsed.notes == ("left out 1 chart(s) whose chart part is missing or unreadable: "
                            "their text could not be read",)


def test_a_workbook_without_drawings_reads_as_before() -> None:
    parsed = extract(workbook(chart=False))

    assert "Chart" not in parsed.text and parsed.notes == ()


@pytest.mark.parametrize("path", sorted(REALDOCS.rglob("*.xlsx")), ids=lambda p: p.name)
def test_real_workbooks_say_nothing_of_drawings_they_do_not_have(path: Path) -> None:
    try:
        parsed = extract(path.read_bytes())
    except Exception:  # a refused real file is another test's business
        pytest.skip("refused")
    assert not [note for note in parsed.notes if "drawings" in note]


def test_a_chart_sheet_reads_after_the_worksheets_named_by_its_tab() -> None:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Data"
    for row in [["Region", "2025"], ["North", 12], ["South", 7]]:
        sheet.append(row)
    overview = book.create_chartsheet("Overview")
    bars = BarChart()
    bars.title = "Sales by region"
    bars.add_data(Reference(sheet, min_col=2, min_row=1, max_row=3), titles_from_data=True)
    overview.add_chart(bars)
    buffer = io.BytesIO()
    book.save(buffer)

    parsed = extract(buffer.getvalue())

    assert parsed.text.split("\n\n") == ["Region\t2025\nNorth\t12\nSouth\t7",
                                         "Chart sheet Overview: Chart: Sales by region. "
                                         "Series: series 1."]
    assert parsed.notes == (READ.format(1, 0),)


def test_a_newer_chart_excel_writes_twice_is_read_and_its_fallback_sentence_is_not() -> None:
    from tests.unit.guard.test_office_charts import CHARTEX_TYPE, CX, WATERFALL, chartex_xml

    old_readers = "This chart is not available in your version of Excel."

    frame = ('<xdr:graphicFrame macro=""><xdr:nvGraphicFramePr><xdr:cNvPr id="4" '
             'name="Chart 4"/><xdr:cNvGraphicFramePr/></xdr:nvGraphicFramePr><xdr:xfrm/>'
             f'<a:graphic><a:graphicData uri="{CX}"><cx:chart xmlns:cx="{CX}" xmlns:r="http://'
             'schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="rIdCx"/>'
             "</a:graphicData></a:graphic></xdr:graphicFrame>")
    twice = ('<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-'
             'compatibility/2006"><mc:Choice xmlns:cx1="http://schemas.microsoft.com/office/'
             f'drawing/2015/9/8/chartex" Requires="cx1">{anchor(8, frame)}</mc:Choice>'
             f"<mc:Fallback>{anchor(8, text_box(old_readers))}</mc:Fallback>"
             "</mc:AlternateContent>")
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(with_drawing(workbook(), twice))) as source, \
            zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/drawings/_rels/drawing1.xml.rels":
                data = data.replace(b"</Relationships>", (
                    b'<Relationship Id="rIdCx" Type="http://schemas.microsoft.com/office/2014/'
                    b'relationships/chartEx" Target="../charts/chartEx1.xml"/></Relationships>'))
            elif info.filename == "[Content_Types].xml":
                data = data.replace(b"</Types>", (
                    f'<Override PartName="/xl/charts/chartEx1.xml" ContentType="{CHARTEX_TYPE}"/>'
                    "</Types>").encode())
            target.writestr(info, data)
        target.writestr("xl/charts/chartEx1.xml", chartex_xml())

    parsed = UnstructuredExtractor().extract("xlsx", None, out.getvalue(), max_pages=5)

    assert WATERFALL in parsed.text and "not available" not in parsed.text
    assert READ.format(2, 0) in parsed.notes
