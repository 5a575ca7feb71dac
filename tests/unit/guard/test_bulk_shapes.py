"""`extract_many`'s shapes: each extracted file as its pages or elements, traced to the file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.guard import (
    Extracted,
    ExtractedPart,
    IsolatedExtractor,
    Omission,
    Skipped,
    extract_many,
)
from capsa.guard.bulk import BulkSource, display_name, extracted_parts
from capsa.guard.extractors import PlainTextExtractor, default_router
from capsa.guard.samples import pdf_with_text

FILES = Path(__file__).resolve().parents[2] / "realdocs" / "files"
REPORT = FILES / "report.docx"
MAIL = FILES / "quarterly-with-attachments.eml"
PAGES = ["Travel policy. Flights are booked in economy class.",
         "Hotels. The nightly hotel cap is EUR 165.",
         "Meals. Travellers receive a daily allowance of EUR 55."]
Outcome = Extracted | ExtractedPart | Omission | Skipped


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    extractor = IsolatedExtractor(default_router(), workers=2)
    yield extractor
    extractor.close()


def _sources(tmp_path: Path) -> list[BulkSource]:
    policy = tmp_path / "policy.pdf"
    policy.write_bytes(pdf_with_text(PAGES))
    return [policy, REPORT, MAIL]


def _runs(outcomes: Sequence[Outcome]) -> list[tuple[str, list[Outcome]]]:
    """Consecutive outcomes of the same file, by label."""
    return [(label, list(run)) for label, run in groupby(outcomes, key=lambda o: o.label)]


@pytest.mark.slow
def test_page_shape_yields_each_pdf_page_in_order_with_the_files_provenance(
        tmp_path: Path, pool: IsolatedExtractor) -> None:
    outcomes = list(extract_many(_sources(tmp_path), extractor=pool, ordered=True,
                                 shape="page"))
    pages = [o for o in outcomes if o.label == "policy.pdf"]

    assert all(isinstance(o, ExtractedPart) for o in outcomes)
    assert outcomes[:3] == pages
    assert [p.text for p in pages] == PAGES
    assert [p.metadata["page_number"] for p in pages] == [1, 2, 3]
    assert [p.index for p in pages] == [0, 1, 2]
    assert [p.id for p in pages] == [f"{pages[0].sha256[:16]}-p{n}" for n in (1, 2, 3)]
    assert {p.source for p in pages} == {str(tmp_path / "policy.pdf")}
    assert pages[0].metadata["capsa_sha256"] == pages[0].sha256
    assert pages[0].metadata["filetype"] == "application/pdf"


@pytest.mark.slow
def test_parts_of_an_attachment_name_the_mail_they_came_in(pool: IsolatedExtractor) -> None:
    outcomes = list(extract_many([MAIL], extractor=pool, ordered=True, shape="page"))
    inside = [o for o in outcomes if o.parent is not None]
    pdf_pages = [o for o in inside if o.label.endswith("/report.pdf")]

    assert outcomes[0].label == MAIL.name and outcomes[0].parent is None
    assert {o.parent for o in inside} >= {MAIL.name}
    assert all(isinstance(o, ExtractedPart) and o.source == str(MAIL) for o in outcomes)
    assert pdf_pages and all(p.metadata["capsa_parent"] == MAIL.name for p in pdf_pages)
    assert pdf_pages[0].metadata["page_number"] == 1
    assert display_name(pdf_pages[0]) == f"report.pdf in {MAIL}"


@pytest.mark.slow
def test_element_shape_gives_headings_and_tables_as_the_loader_does(
        pool: IsolatedExtractor) -> None:
    parts = [o for o in extract_many([REPORT], extractor=pool, shape="element")
             if isinstance(o, ExtractedPart)]
    by_id = {p.id: p for p in parts}
    table = next(p for p in parts if p.metadata["category"] == "Table")

    assert parts[0].metadata["category"] == "Title"
    assert by_id[table.metadata["parent_id"]].text == "Berth figures"
    assert table.metadata["capsa_heading"] == "Berth figures"
    assert table.metadata["text_as_html"].startswith("<table><tr><td>Berth</td>")
    assert [p.index for p in parts] == list(range(len(parts)))
    assert {p.label for p in parts} == {"report.docx"}


@pytest.mark.slow
def test_unordered_parts_are_the_ordered_ones_each_file_kept_together(
        tmp_path: Path, pool: IsolatedExtractor) -> None:
    sources = _sources(tmp_path)
    ordered = list(extract_many(sources, extractor=pool, ordered=True, shape="element"))
    unordered = list(extract_many(sources, extractor=pool, shape="element"))
    runs = _runs(unordered)

    assert sorted((o.label, o.id) for o in unordered) == sorted((o.label, o.id) for o in ordered)
    assert len(runs) == len({label for label, _ in runs})  # no file split by another's parts
    for _, run in runs:
        assert [p.index for p in run if isinstance(p, ExtractedPart)] == list(range(len(run)))


@pytest.mark.slow
def test_the_file_shape_is_the_default_and_yields_extracted_files(
        tmp_path: Path, pool: IsolatedExtractor) -> None:
    sources = _sources(tmp_path)
    default = list(extract_many(sources, extractor=pool, ordered=True))
    files = list(extract_many(sources, extractor=pool, ordered=True, shape="file"))

    assert default == files
    assert all(type(o) is Extracted for o in files)
    assert [o.label for o in files][:2] == ["policy.pdf", "report.docx"]


def test_omissions_and_skips_come_through_between_the_parts(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.jsonl"
    sources: list[BulkSource] = [("a.txt", b"one\n\ntwo"), ("empty.txt", b""),
                                 ("b.txt", b"three")]
    first = list(extract_many(sources, extractor=PlainTextExtractor(), workers=2,
                              ordered=True, manifest=manifest, shape="element"))
    again = list(extract_many([*sources, ("c.txt", b"four")], extractor=PlainTextExtractor(),
                              ordered=True, manifest=manifest, shape="element"))

    assert [(type(o).__name__, o.label) for o in first] == [
        ("ExtractedPart", "a.txt"), ("ExtractedPart", "a.txt"), ("Omission", "empty.txt"),
        ("ExtractedPart", "b.txt")]
    assert [(type(o).__name__, o.label) for o in again] == [
        ("Skipped", "a.txt"), ("Skipped", "empty.txt"), ("Skipped", "b.txt"),
        ("ExtractedPart", "c.txt")]
    assert len(manifest.read_text().splitlines()) == 4  # files recorded, not parts


def test_an_unknown_shape_is_refused_at_the_call_before_any_file_is_read() -> None:
    def sources() -> Iterator[BulkSource]:
        raise AssertionError("read a source")
        yield ("a.txt", b"a")  # pragma: no cover

    with pytest.raises(ValueError, match="shape must be one of"):
        extract_many(sources(), extractor=PlainTextExtractor(),
                     shape="paragraph")  # type: ignore[call-overload]


def test_a_part_is_frozen_and_its_metadata_a_fresh_dict(tmp_path: Path) -> None:
    (part,) = extract_many([("a.txt", b"alpha")], extractor=PlainTextExtractor(), shape="page")
    assert isinstance(part, ExtractedPart)
    part.metadata["source"] = "elsewhere"

    assert part.metadata["source"] == "a.txt"
    with pytest.raises(ValueError, match="frozen"):
        part.label = "b.txt"  # type: ignore[misc]


_TEXTS = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                          min_size=1, max_size=60).map(lambda t: t.replace("\r", "")),
                  min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(texts=_TEXTS, shape=st.sampled_from(["page", "element"]))
def test_each_files_parts_are_its_spans_in_order_and_hold_every_word(
        texts: list[str], shape: str) -> None:
    sources: list[BulkSource] = [(f"f{i}.txt", "\n\n".join(text.split("|")).encode())
                                 for i, text in enumerate(texts)]
    files = [o for o in extract_many(sources, extractor=PlainTextExtractor())
             if isinstance(o, Extracted)]
    parts = list(extract_many(sources, extractor=PlainTextExtractor(), workers=2,
                              shape=shape))  # type: ignore[call-overload]

    assert {o.label for o in parts if isinstance(o, ExtractedPart)} == {f.label for f in files}
    for item in files:
        mine = [o for o in parts if isinstance(o, ExtractedPart) and o.label == item.label]
        assert mine == list(extracted_parts(item, shape))  # type: ignore[arg-type]
        position = 0
        for part in mine:
            position = item.text.index(part.text, position) + len(part.text)
        assert " ".join(p.text for p in mine).split() == item.text.split()
