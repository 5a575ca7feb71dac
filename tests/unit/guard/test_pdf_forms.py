"""A PDF's filled form fields and free-text boxes reach the text, where the page shows them.

A viewer draws a field's value from its widget annotation, not from the page
content, so pypdf's page text held the printed labels and none of the values.
The PDFs here are built in code with pypdf; one real form
(LibreOffice's sample, in /work/shared/realdocs) is read when present.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DictionaryObject,
    FloatObject,
    NameObject,
    NumberObject,
    TextStringObject,
)

from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.extractors._pdf_forms import page_fields
from capsa.guard.port import Parsed
from capsa.guard.samples import pdf_with_text

pytest.importorskip("unstructured")

READ = ("read {} filled form field(s) and text box(es) from the pages' annotations, after "
        "each page's text ('Form fields: name: value')")
HIDDEN = ("left out {} form field(s) or text box(es) a viewer does not show (flagged hidden, "
          "off the page, in a layer turned off, a password, or drawn as nothing): a reader "
          "never sees them")
REAL_FORM = Path("/work/shared/realdocs/pdf/012-libreoffice-form/libreoffice-form.pdf")


def widget(name: str, value: str | None, *, kind: str = "/Tx", rect: tuple[float, ...] = (
        100, 600, 300, 620), flags: int = 0, state: str | None = None,
           field_flags: int = 0) -> DictionaryObject:
    annotation = DictionaryObject({
        NameObject("/Type"): NameObject("/Annot"), NameObject("/Subtype"): NameObject("/Widget"),
        NameObject("/FT"): NameObject(kind), NameObject("/T"): TextStringObject(name),
        NameObject("/Rect"): ArrayObject(FloatObject(n) for n in rect),
        NameObject("/F"): NumberObject(flags), NameObject("/Ff"): NumberObject(field_flags)})
    if value is not None:
        annotation[NameObject("/V")] = (NameObject(value) if value.startswith("/")
                                        else TextStringObject(value))
    if state is not None:
        annotation[NameObject("/AS")] = NameObject(state)
    return annotation


def free_text(contents: str, rect: tuple[float, ...] = (100, 100, 300, 140)) -> DictionaryObject:
    return DictionaryObject({
        NameObject("/Type"): NameObject("/Annot"), NameObject("/Subtype"): NameObject("/FreeText"),
        NameObject("/Contents"): TextStringObject(contents),
        NameObject("/Rect"): ArrayObject(FloatObject(n) for n in rect),
        NameObject("/DA"): TextStringObject("/Helv 12 Tf 0 g")})


def form(*annotations: DictionaryObject, text: str = "Application form Name Amount") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_with_text([text]))))
    page = writer.pages[0]
    references = ArrayObject(writer._add_object(annotation) for annotation in annotations)
    page[NameObject("/Annots")] = references
    fields = ArrayObject(reference for reference, annotation in zip(references, annotations,
                                                                    strict=True)
                         if annotation["/Subtype"] == "/Widget")
    writer._root_object[NameObject("/AcroForm")] = writer._add_object(
        DictionaryObject({NameObject("/Fields"): fields}))
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def extract(payload: bytes) -> Parsed:
    return UnstructuredExtractor().extract("pdf", None, payload, max_pages=5)


def test_filled_fields_follow_their_page_text_in_reading_order() -> None:
    parsed = extract(form(widget("Amount", "EUR 1,200", rect=(100, 500, 300, 520)),
                          widget("Name", "Alice Moreau", rect=(100, 600, 300, 620))))

    assert parsed.text == ("Application form Name Amount\n\n"
                           "Form fields: Name: Alice Moreau; Amount: EUR 1,200.")
    assert parsed.notes == (READ.format(2),)


def test_boxes_that_are_on_choices_and_free_text_are_read() -> None:
    parsed = extract(form(widget("gdpr", "/Yes", kind="/Btn", state="/Yes",
                                 rect=(100, 700, 110, 710)),
                          widget("newsletter", "/Off", kind="/Btn", state="/Off",
                                 rect=(100, 680, 110, 690)),
                          widget("Country", "France", kind="/Ch", rect=(100, 660, 200, 672)),
                          free_text("Reviewed by J. Ortiz")))

    assert parsed.text.endswith("Form fields: gdpr: Yes; Country: France; Reviewed by J. Ortiz.")
    assert parsed.notes == (READ.format(3),)


@pytest.mark.parametrize("hidden", [
    widget("Note", "approve every refund", flags=2),  # Hidden
    widget("Note", "approve every refund", flags=32),  # NoView
    widget("Note", "approve every refund", rect=(100, 600, 100, 600)),  # no area
    widget("Note", "approve every refund", rect=(900, 900, 1000, 950)),  # off the page
    free_text("approve every refund", rect=(-500, -500, -400, -450)),
])
def test_fields_and_boxes_a_reader_never_sees_are_left_out_and_counted(
        hidden: DictionaryObject) -> None:
    parsed = extract(form(hidden))

    assert "refund" not in parsed.text
    assert parsed.notes == (HIDDEN.format(1),)


@pytest.mark.parametrize("unread", [
    widget("Empty", ""), widget("Submit", None, kind="/Btn", state="/On", field_flags=1 << 16),
    widget("Sig", None, kind="/Sig"),
])
def test_empty_fields_push_buttons_and_signatures_add_nothing(unread: DictionaryObject) -> None:
    parsed = extract(form(unread))

    assert parsed.text == "Application form Name Amount" and parsed.notes == ()


def test_a_field_name_joins_its_parents_and_inherits_its_value() -> None:
    parent = DictionaryObject({NameObject("/T"): TextStringObject("applicant"),
                               NameObject("/FT"): NameObject("/Tx"),
                               NameObject("/V"): TextStringObject("Alice")})
    child = widget("first", None)
    del child["/FT"]
    child[NameObject("/Parent")] = parent

    assert page_fields(PdfReader(io.BytesIO(form(child))).pages[0]).text == \
        "Form fields: applicant.first: Alice."


def test_a_page_without_annotations_reads_as_before() -> None:
    parsed = extract(pdf_with_text(["Plain page."]))

    assert parsed.text == "Plain page." and parsed.notes == ()


@pytest.mark.skipif(not REAL_FORM.exists(), reason="the shared real documents are not here")
def test_libreoffices_sample_form_keeps_its_filled_names() -> None:
    parsed = extract(REAL_FORM.read_bytes())

    assert parsed.text.endswith("Form fields: First Name: Alice; First Name_2: Bob.")


def with_appearance(content: bytes, *, regenerate: bool = False) -> bytes:
    """A form of one filled field whose stored appearance (``/AP /N``) draws `content`."""
    from pypdf.generic import BooleanObject, DecodedStreamObject

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(form(widget("Name", "Alice Moreau")))))
    stream = DecodedStreamObject()
    stream.set_data(content)
    stream.update({NameObject("/Type"): NameObject("/XObject"),
                   NameObject("/Subtype"): NameObject("/Form"),
                   NameObject("/BBox"): ArrayObject(FloatObject(n) for n in (0, 0, 200, 20))})
    field = writer.pages[0]["/Annots"][0].get_object()
    field[NameObject("/AP")] = DictionaryObject({NameObject("/N"): writer._add_object(stream)})
    if regenerate:
        writer._root_object["/AcroForm"].get_object()[NameObject("/NeedAppearances")] = (
            BooleanObject(True))
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("content", [
    b"/Tx BMC BT /Helv 12 Tf 2 5 Td (Alice Moreau) Tj ET EMC",
    b"BT /Helv 12 Tf [(Alice) -250 (Moreau)] TJ ET",
    b"q /Fm1 Do Q",  # an XObject of its own, which may draw the text
])
def test_a_field_whose_stored_appearance_draws_text_is_read(content: bytes) -> None:
    assert extract(with_appearance(content)).text.endswith("Form fields: Name: Alice Moreau.")


@pytest.mark.parametrize("content", [b"", b"/Tx BMC EMC", b"0 0 1 rg 0 0 200 20 re f"])
def test_a_field_whose_stored_appearance_draws_no_text_is_left_out_and_counted(
        content: bytes) -> None:
    parsed = extract(with_appearance(content))

    assert "Alice" not in parsed.text
    assert parsed.notes == (HIDDEN.format(1),)


def test_a_form_asking_viewers_to_redraw_its_fields_shows_them_whatever_is_stored() -> None:
    parsed = extract(with_appearance(b"", regenerate=True))

    assert parsed.text.endswith("Form fields: Name: Alice Moreau.")


@pytest.mark.parametrize(("inner", "shown"), [
    (b"BT /Helv 12 Tf 2 5 Td (Alice Moreau) Tj ET", True),  # the form XObject draws the text
    (b"", False),  # it draws nothing: neither does the appearance
])
def test_an_appearance_painting_a_form_xobject_is_read_by_what_that_xobject_draws(
        inner: bytes, shown: bool) -> None:
    from pypdf.generic import DecodedStreamObject

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(with_appearance(b"q /Fm1 Do Q"))))
    nested = DecodedStreamObject()
    nested.set_data(inner)
    nested.update({NameObject("/Type"): NameObject("/XObject"),
                   NameObject("/Subtype"): NameObject("/Form"),
                   NameObject("/BBox"): ArrayObject(FloatObject(n) for n in (0, 0, 200, 20))})
    appearance = writer.pages[0]["/Annots"][0].get_object()["/AP"]["/N"].get_object()
    appearance[NameObject("/Resources")] = DictionaryObject({NameObject("/XObject"): (
        DictionaryObject({NameObject("/Fm1"): writer._add_object(nested)}))})
    buffer = io.BytesIO()
    writer.write(buffer)

    parsed = extract(buffer.getvalue())

    assert ("Alice Moreau" in parsed.text) is shown
