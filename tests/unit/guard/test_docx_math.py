"""Word equations reach the text as linear text, where the reader sees them.

unstructured 0.27 dropped every word and number of an equation (``m:oMath``)
without a word said (`capsa.guard.extractors._docx_math`). Documents are
built part by part and read by the real `unstructured` partitioner; one comes
from pandoc, which capsa runs on every ODT.
"""

from __future__ import annotations

import io
import time
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.guard.test_docx_containers import cell_table, inserted, text_box
from tests.unit.guard.test_docx_notes import cite, notes_part
from tests.unit.guard.test_office_hidden import (
    MARKER,
    REALDOCS,
    docx,
    extract,
    paragraph,
    run,
)

import capsa.guard.extractors._office_hidden as office_hidden
from capsa.guard.extractors import OfficeExtractor
from capsa.guard.extractors._docx_math import Equations, read_equations

pytest.importorskip("unstructured")

M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
EQUATIONS = ("read {} equation(s) as linear text, as Word's linear format writes them: a "
             "fraction as a/b, a power as x^2, an index as x_i, a root as √x")


def r(text: str, properties: str = "") -> str:
    """A math run holding `text` (`properties`: its ``w:rPr`` content)."""
    formatted = f"<w:rPr>{properties}</w:rPr>" if properties else ""
    return f"<m:r>{formatted}<m:t>{text}</m:t></m:r>"


def omath(*content: str) -> str:
    return f'<m:oMath xmlns:m="{M}">{"".join(content)}</m:oMath>'


def display(*equations: str) -> str:
    inner = "".join(f"<m:oMath>{equation}</m:oMath>" for equation in equations)
    return (f'<m:oMathPara xmlns:m="{M}"><m:oMathParaPr><m:jc m:val="center"/></m:oMathParaPr>'
            f"{inner}</m:oMathPara>")


def script(kind: str, base: str, **parts: str) -> str:
    return f"<m:{kind}><m:e>{base}</m:e>" + "".join(
        f"<m:{name}>{value}</m:{name}>" for name, value in parts.items()) + f"</m:{kind}>"


def fraction(numerator: str, denominator: str, kind: str = "") -> str:
    properties = f'<m:fPr><m:type m:val="{kind}"/></m:fPr>' if kind else ""
    return f"<m:f>{properties}<m:num>{numerator}</m:num><m:den>{denominator}</m:den></m:f>"


def delimited(*parts: str, properties: str = "") -> str:
    return (f"<m:d><m:dPr>{properties}</m:dPr>" + "".join(f"<m:e>{part}</m:e>" for part in parts)
            + "</m:d>")


def reads(*content: str) -> str:
    """The text of a document whose one paragraph holds the equation made of `content`."""
    return extract("docx", docx(paragraph(omath(*content)))).text


# ------------------------------------------------------------------------ where they stand


def test_an_inline_equation_is_read_where_it_stands_and_named_in_a_note() -> None:
    parsed = extract("docx", docx(paragraph(
        run("Energy is "), omath(r("E=m"), script("sSup", r("c"), sup=r("2"))), run(" always."))))

    assert parsed.text == "Energy is E=mc^2 always."
    assert parsed.notes == (EQUATIONS.format(1),)


def test_a_displayed_equation_is_a_paragraph_of_its_own() -> None:
    parsed = extract("docx", docx(
        paragraph(run("The mean is")) + paragraph(display(fraction(r("a+b"), r("2"))))
        + paragraph(run("for two values."))))

    assert parsed.text == "The mean is\n\n(a+b)/2\n\nfor two values."


def test_a_display_beside_text_keeps_its_own_line_and_each_equation_its_own() -> None:
    parsed = extract("docx", docx(paragraph(run("Solve"), display(r("x+y=3"), r("x−y=1")),
                                            run("for x."))))

    assert parsed.text.splitlines() == ["Solve", "x+y=3", "x−y=1", "for x."]
    assert parsed.notes == (EQUATIONS.format(2),)


def test_an_equation_standing_in_the_body_outside_any_paragraph_becomes_one() -> None:
    parsed = extract("docx", docx(paragraph(run("shown1")) + display(r("a=b"))))

    assert parsed.text == "shown1\n\na=b"


def test_equations_in_a_cell_a_header_a_text_box_and_a_footnote_are_read() -> None:
    body = (cell_table(paragraph(omath(r("x=1"))))
            + paragraph(run("Box here."), text_box(paragraph(omath(r("y=2")))))
            + paragraph(run("Cited"), cite("footnote", 1)))
    parts = notes_part("footnote", {1: paragraph(run("Where "), omath(r("z=3")))})

    parsed = extract("docx", docx(body, header=paragraph(omath(r("h=4"))), parts=parts))

    for equation in ("x=1", "y=2", "Where z=3", "h=4"):
        assert equation in parsed.text
    assert parsed.text.count("y=2") == 1  # a drawing's text box is read once
    assert parsed.notes[-1] == EQUATIONS.format(4)


def test_an_equation_in_a_tracked_insertion_is_read_and_in_a_deletion_is_not() -> None:
    parsed = extract("docx", docx(paragraph(
        run("shown1 "), inserted(omath(r("shown2"))),
        f'<w:del w:id="9" w:author="Reviewer">{omath(r("hidden3"))}</w:del>')))

    assert MARKER.findall(parsed.text) == ["shown1", "shown2"]


def test_a_hidden_math_run_and_an_invisible_phantom_are_left_out_and_counted() -> None:
    phantom = ('<m:phant><m:phantPr><m:show m:val="0"/></m:phantPr>'
               f"<m:e>{r('hidden2')}</m:e></m:phant>")
    shown_phantom = f"<m:phant><m:e>{r(' shown4')}</m:e></m:phant>"

    parsed = extract("docx", docx(paragraph(omath(
        r("shown1 "), phantom, r("hidden3 ", "<w:vanish/>"), shown_phantom))))

    assert MARKER.findall(parsed.text) == ["shown1", "shown4"]
    assert parsed.notes == (EQUATIONS.format(1) + "; left out 2 part(s) of them Word does not "
                            "show",)


def test_an_empty_equation_changes_nothing_and_says_nothing() -> None:
    parsed = extract("docx", docx(paragraph(run("shown1"), omath())))

    assert parsed.text == "shown1"
    assert parsed.notes == ()


# -------------------------------------------------------------------- the linear format


@pytest.mark.parametrize(("content", "expected"), [
    (fraction(r("1"), r("2")), "1/2"),
    (fraction(r("−b"), r("2a")), "(−b)/(2a)"),
    (fraction(r("n"), r("k"), "noBar"), "n¦k"),
    (script("sSup", r("x"), sup=r("n+1")), "x^(n+1)"),
    (script("sSup", r("x"), sup=r("10")), "x^10"),
    (script("sSub", r("x"), sub=r("ij")), "x_ij"),
    (script("sSub", r("x"), sub=r("i+1")), "x_(i+1)"),
    (script("sSubSup", r("x"), sub=r("i"), sup=r("2")), "x_i^2"),
    (script("sSup", delimited(r("a+b")), sup=r("2")), "(a+b)^2"),
    ("<m:sPre><m:sub>" + r("6") + "</m:sub><m:sup>" + r("14") + "</m:sup><m:e>" + r("C")
     + "</m:e></m:sPre>", "_6^14 C"),
    ('<m:rad><m:radPr><m:degHide m:val="1"/></m:radPr><m:deg/><m:e>' + r("x+1")
     + "</m:e></m:rad>", "√(x+1)"),
    ("<m:rad><m:deg>" + r("3") + "</m:deg><m:e>" + r("x") + "</m:e></m:rad>", "∛x"),
    ("<m:rad><m:deg>" + r("5") + "</m:deg><m:e>" + r("x") + "</m:e></m:rad>", "√(5&x)"),
    ('<m:nary><m:naryPr><m:chr m:val="∑"/></m:naryPr><m:sub>' + r("i=1") + "</m:sub><m:sup>"
     + r("n") + "</m:sup><m:e>" + script("sSub", r("x"), sub=r("i")) + "</m:e></m:nary>",
     "∑_(i=1)^n x_i"),
    ("<m:nary><m:sub>" + r("0") + "</m:sub><m:sup>" + r("1") + "</m:sup><m:e>" + r("f(x)dx")
     + "</m:e></m:nary>", "∫_0^1 f(x)dx"),
    (delimited(r("a"), r("b"), properties='<m:begChr m:val="["/><m:endChr m:val="]"/>'
               '<m:sepChr m:val=","/>'), "[a,b]"),
    (delimited(r("x"), properties='<m:begChr m:val="|"/><m:endChr m:val="|"/>'), "|x|"),
    ("<m:func><m:fName>" + r("sin") + "</m:fName><m:e>" + r("x") + "</m:e></m:func>",
     "sin x"),
    ("<m:func><m:fName>" + r("cos") + "</m:fName><m:e>" + delimited(r("x+y"))
     + "</m:e></m:func>", "cos(x+y)"),
    ("<m:func><m:fName><m:limLow><m:e>" + r("lim") + "</m:e><m:lim>" + r("n→∞")
     + "</m:lim></m:limLow></m:fName><m:e>" + script("sSub", r("a"), sub=r("n"))
     + "</m:e></m:func>", "lim_(n→∞) a_n"),
    ("<m:acc><m:e>" + r("x") + "</m:e></m:acc>", "x\u0302"),
    ('<m:bar><m:barPr><m:pos m:val="top"/></m:barPr><m:e>' + r("z") + "</m:e></m:bar>",
     "z\u0305"),
    ("<m:box><m:e>" + r("a=b") + "</m:e></m:box>", "a=b"),
    (delimited("<m:m><m:mr><m:e>" + r("1") + "</m:e><m:e>" + r("0") + "</m:e></m:mr><m:mr>"
               "<m:e>" + r("0") + "</m:e><m:e>" + r("1") + "</m:e></m:mr></m:m>"),
     "(1, 0; 0, 1)"),
    (delimited("<m:eqArr><m:e>" + r("x, x≥0") + "</m:e><m:e>" + r("−x, x<0".replace("<", "&lt;"))
               + "</m:e></m:eqArr>", properties='<m:begChr m:val="{"/><m:endChr m:val=""/>'),
     "{x, x≥0; −x, x<0"),
    ("<m:future><m:e>" + r("shown1") + "</m:e>" + r("shown2") + "</m:future>", "shown1shown2"),
], ids=["fraction", "fraction-of-terms", "binomial", "power-of-a-term", "power-number",
        "index-word", "index-term", "sub-superscript", "power-of-brackets", "prescript",
        "square-root", "cube-root", "fifth-root", "sum", "integral", "brackets", "absolute",
        "function", "function-of-brackets", "limit", "accent", "overbar", "box", "matrix",
        "cases", "unknown-element"])
def test_each_structure_reads_as_word_linear_format(content: str, expected: str) -> None:
    assert reads(content) == expected


def test_an_equation_array_on_its_own_is_one_line_a_row() -> None:
    parsed = extract("docx", docx(paragraph(display(
        "<m:eqArr><m:e>" + r("x+y=3") + "</m:e><m:e>" + r("x−y=1") + "</m:e></m:eqArr>"))))

    assert parsed.text.splitlines() == ["x+y=3", "x−y=1"]


STRUCTURES = ["plain", "f", "sSup", "sSub", "sSubSup", "rad", "nary", "d", "func", "acc",
              "eqArr", "unknown"]


def _wrap(kind: str, first: str, second: str) -> str:
    return {"plain": first + second, "f": fraction(first, second),
            "sSup": script("sSup", first, sup=second), "sSub": script("sSub", first, sub=second),
            "sSubSup": script("sSubSup", first, sub=second, sup=r("")),
            "rad": f"<m:rad><m:deg>{first}</m:deg><m:e>{second}</m:e></m:rad>",
            "nary": f"<m:nary><m:sub>{first}</m:sub><m:e>{second}</m:e></m:nary>",
            "d": delimited(first, second), "acc": f"<m:acc><m:e>{first}{second}</m:e></m:acc>",
            "func": f"<m:func><m:fName>{first}</m:fName><m:e>{second}</m:e></m:func>",
            "eqArr": f"<m:eqArr><m:e>{first}</m:e><m:e>{second}</m:e></m:eqArr>",
            "unknown": f"<m:new><m:a>{first}</m:a><m:b>{second}</m:b></m:new>"}[kind]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(STRUCTURES), min_size=1, max_size=6))
def test_every_word_of_a_nested_equation_is_read_in_order(kinds: list[str]) -> None:
    content = r("shown0")
    for number, kind in enumerate(kinds, start=1):
        content = _wrap(kind, content, r(f" shown{number} "))

    assert MARKER.findall(reads(content)) == [f"shown{n}" for n in range(len(kinds) + 1)]


# ---------------------------------------------------------------------- hostile depth


def test_a_10000_level_equation_is_read_in_order_without_recursion() -> None:
    from docx import Document
    from lxml import etree

    document = Document(io.BytesIO(docx(paragraph(omath()))))
    holder = next(document.element.body.iter(f"{{{M}}}oMath"))
    for _ in range(10_000):  # built in memory: no XML parser would take this many levels
        level = etree.SubElement(holder, f"{{{M}}}f")
        holder = etree.SubElement(level, f"{{{M}}}num")
        denominator = etree.SubElement(etree.SubElement(level, f"{{{M}}}den"), f"{{{M}}}r")
        etree.SubElement(denominator, f"{{{M}}}t").text = "2"
    etree.SubElement(etree.SubElement(holder, f"{{{M}}}r"), f"{{{M}}}t").text = "x"

    started = time.monotonic()
    equations = read_equations(document)
    took = time.monotonic() - started

    text = document.paragraphs[0].text
    assert equations == Equations(read=1)
    assert text.count("2") == 10_000 and text.count("x") == 1
    assert text.index("x") < text.index("2")  # the innermost numerator, first in order
    assert took < 2.0


def test_an_equation_as_deep_as_the_xml_parser_allows_is_read_whole() -> None:
    content = r("x")
    for _ in range(120):  # libxml2 refuses documents over 256 levels before any parser
        content = fraction(content, r("2"))

    text = reads(content)

    assert text.count("2") == 120 and text.count("x") == 1


# ------------------------------------------------------------------ real files, pandoc


ODF = "urn:oasis:names:tc:opendocument:xmlns"
FORMULA = ('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><semantics><mrow>'
           "<mi>x</mi><mo>=</mo><mfrac><mrow><mo>−</mo><mi>b</mi><mo>±</mo><msqrt><mrow><msup>"
           "<mi>b</mi><mn>2</mn></msup><mo>−</mo><mn>4</mn><mi>a</mi><mi>c</mi></mrow></msqrt>"
           "</mrow><mrow><mn>2</mn><mi>a</mi></mrow></mfrac></mrow></semantics></math>")


def odt_with_formula() -> bytes:
    """An ODT whose paragraph holds a formula object (MathML), as LibreOffice stores one."""
    content = (f'<office:document-content xmlns:office="{ODF}:office:1.0" '
               f'xmlns:text="{ODF}:text:1.0" xmlns:draw="{ODF}:drawing:1.0" '
               f'xmlns:svg="{ODF}:svg-compatible:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" '
               'office:version="1.3"><office:body><office:text><text:p>The roots are '
               '<draw:frame draw:name="F1" text:anchor-type="as-char" svg:width="3cm" '
               'svg:height="1cm"><draw:object xlink:href="./Object 1" xlink:type="simple" '
               'xlink:show="embed" xlink:actuate="onLoad"/></draw:frame> for any quadratic.'
               "</text:p></office:text></office:body></office:document-content>")
    manifest = ('<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:'
                'manifest:1.0" manifest:version="1.3"><manifest:file-entry manifest:full-path="/" '
                'manifest:media-type="application/vnd.oasis.opendocument.text"/>'
                '<manifest:file-entry manifest:full-path="content.xml" '
                'manifest:media-type="text/xml"/><manifest:file-entry manifest:full-path='
                '"Object 1/" manifest:media-type="application/vnd.oasis.opendocument.formula"/>'
                "</manifest:manifest>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("content.xml", content)
        archive.writestr("styles.xml", f'<office:document-styles xmlns:office="{ODF}:office:1.0"'
                                       ' office:version="1.3"><office:styles/>'
                                       "</office:document-styles>")
        archive.writestr("Object 1/content.xml", FORMULA)
    return buffer.getvalue()


def test_a_formula_in_an_odt_reads_as_linear_text_after_pandoc_writes_it_as_omml() -> None:
    pytest.importorskip("pypandoc")

    parsed = OfficeExtractor().extract("odt", None, odt_with_formula(), max_pages=5)

    assert parsed.text == "The roots are\n\nx=(−b±√(b^2−4ac))/(2a)\n\nfor any quadratic."
    assert parsed.notes[-1] == EQUATIONS.format(1)


@pytest.mark.parametrize("name", ["report.docx", "annual-review.docx",
                                  "libreoffice/report.docx"])
def test_real_documents_without_equations_read_as_before(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = (REALDOCS / name).read_bytes()
    parsed = extract("docx", payload)
    monkeypatch.setattr(office_hidden, "read_equations", lambda document: Equations())

    assert (parsed.text, parsed.notes) == (extract("docx", payload).text, ())
