"""HTML phonetic guides read as the whole word, then its reading in parentheses.

unstructured read ``<ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>`` as "漢かん字じ": a
search for 漢字 found nothing (`capsa.guard.extractors._html_ruby`). Pages are
read by the real `unstructured` partitioner.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from capsa.guard.extractors import default_router
from capsa.guard.samples import epub_chapters, epub_with

pytest.importorskip("unstructured")


def read(kind: str, page: str) -> str:
    parsed = default_router().extract(kind, None, page.encode(), max_pages=5)
    return parsed if isinstance(parsed, str) else parsed.text


def html(body: str) -> str:
    return f"<html><body><p>{body}</p></body></html>"


@pytest.mark.parametrize("guide", [
    "<ruby>漢字<rp>(</rp><rt>かんじ</rt><rp>)</rp></ruby>",       # a reading per word, rp
    "<ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>",                  # a reading per character
    "<ruby><rb>漢</rb><rb>字</rb><rtc><rt>かん</rt><rt>じ</rt></rtc></ruby>",  # base, container
    "<ruby><b>漢</b>字<rt>かん<!-- x -->じ</rt></ruby>",             # markup in both
])
def test_a_guide_reads_as_its_word_then_its_reading(guide: str) -> None:
    assert read("html", html(f"これは{guide}です")) == "これは漢字(かんじ)です"


def test_a_guide_without_a_reading_reads_as_its_word() -> None:
    assert read("html", html("これは<ruby>漢字<rt></rt></ruby>です")) == "これは漢字です"


def test_a_hidden_reading_stays_out() -> None:
    page = html('これは<ruby>漢字<rt style="display:none">secret</rt></ruby>です')

    assert read("html", page) == "これは漢字です"


def test_pinyin_over_hanzi_reads_the_same_way() -> None:
    assert read("html", html("<ruby>北<rt>běi</rt>京<rt>jīng</rt></ruby>")) == "北京(běijīng)"


def test_a_guide_in_an_epub_chapter_reads_the_same_way() -> None:
    # pandoc passes <ruby> on as HTML, which is then read as any page is
    book = epub_chapters([["MARKER"]])
    with zipfile.ZipFile(io.BytesIO(book)) as source:
        chapter = source.read("c.xhtml").decode()
    chapter = chapter.replace("MARKER", "これは<ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>です")

    parsed = default_router().extract("epub", None, epub_with(book, {"c.xhtml": chapter.encode()}),
                                      max_pages=5)

    assert (parsed if isinstance(parsed, str) else parsed.text) == "これは漢字(かんじ)です"
