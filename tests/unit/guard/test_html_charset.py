"""An HTML file's encoding is picked as a browser picks it: its BOM, its ``<meta>``, a guess.

unstructured decoded HTML by statistics alone and never read the page's own
declaration; an undeclared windows-1252 page came back with ``ń`` for ``ñ``
and nothing said. These run the real partitioner through `UnstructuredExtractor`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, extract_attachment
from capsa.guard.extractors import UnstructuredExtractor
from capsa.guard.extractors._html_charset import declared_charset, read_html
from capsa.guard.port import Parsed

pytest.importorskip("unstructured")


def extract(payload: bytes) -> Parsed:
    return UnstructuredExtractor().extract("html", None, payload, max_pages=5)


def page(body: str, *, head: str = "") -> str:
    return f"<html><head>{head}<title>t</title></head><body><p>{body}</p></body></html>"


@pytest.mark.parametrize(("label", "codec", "body"), [
    ("shift_jis", "cp932", "日本語のテキストです"),
    ("EUC-JP", "euc_jp", "日本語のテキストです"),
    ("gb2312", "gb18030", "中文文本内容测试"),
    ("big5", "big5hkscs", "繁體中文內容測試"),
    ("euc-kr", "cp949", "한국어 텍스트입니다"),
    ("windows-1251", "cp1251", "Привет, мир"),
    ("koi8-r", "koi8-r", "Привет, мир"),
    ("latin2", "iso8859-2", "Zażółć gęślą jaźń"),
    ("iso-8859-1", "cp1252", "“Quoted” café — naïve"),  # the label means windows-1252
    ("windows-1254", "cp1254", "İstanbul'da güzel bir gün"),
])
def test_a_declared_encoding_is_the_one_the_page_is_read_in(
        label: str, codec: str, body: str) -> None:
    parsed = extract(page(body, head=f'<meta charset="{label}">').encode(codec))

    assert parsed.text == body
    assert (parsed.encoding, parsed.encoding_confidence) == (codec, 1.0)


@pytest.mark.parametrize("meta", [
    '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
    "<META CONTENT='text/html;charset=\"windows-1251\"' HTTP-EQUIV='content-type'>",
    "<meta charset=windows-1251>",
    '<meta name="x" charset = "windows-1251" />',
])
def test_every_way_a_meta_declares_its_charset_is_read(meta: str) -> None:
    assert extract(page("Привет, мир", head=meta).encode("cp1251")).text == "Привет, мир"


@pytest.mark.parametrize("head", [
    '<!-- <meta charset="koi8-r"> -->',  # in a comment: not a declaration
    '<meta charset="utf-7">',  # a label no browser knows
    '<meta charset="cp037">',
    '<meta name="description" content="charset=koi8-r">',  # not http-equiv
])
def test_what_is_no_declaration_to_a_browser_is_none_to_capsa(head: str) -> None:
    assert declared_charset(page("x", head=head).encode()) is None


def test_a_meta_past_the_first_1024_bytes_is_not_read() -> None:
    late = page("x", head="<!--" + "-" * 1100 + '--><meta charset="koi8-r">')

    assert declared_charset(late.encode()) is None


def test_an_undeclared_windows_1252_page_is_read_as_windows_1252_and_says_so() -> None:
    parsed = extract(page("café señor, naïve façade").encode("cp1252"))

    assert parsed.text == "café señor, naïve façade"
    assert parsed.encoding == "cp1252"


def test_utf8_without_a_declaration_is_read_and_reports_no_encoding() -> None:
    parsed = extract(page("café ✓").encode())

    assert parsed.text == "café ✓" and parsed.encoding is None


def test_windows_1252_bytes_a_browser_shows_as_c1_controls_do_not_fail_the_declaration() -> None:
    decoded = read_html(b'<meta charset="windows-1252"><p>a\x81b\x93c\x94')

    assert decoded.text.endswith("a\x81b\u201cc\u201d") and decoded.note is None


def test_bytes_not_valid_in_the_declared_encoding_are_read_as_they_fit_with_a_note() -> None:
    parsed = extract(page("café señor", head='<meta charset="utf-8">').encode("cp1252"))

    assert parsed.text == "café señor"
    assert parsed.encoding == "cp1252"
    assert parsed.notes[0].startswith("the page declares the encoding utf-8, but byte ")


def test_a_page_declaring_a_replacement_encoding_is_refused_naming_the_file() -> None:
    payload = page("hidden words", head='<meta charset="iso-2022-kr">').encode()

    with pytest.raises(IngestionRejected) as refused:
        extract_attachment(Attachment(label="page.html", media_type="text/html",
                                      payload=payload), UnstructuredExtractor())

    assert (refused.value.label, refused.value.reason) == ("page.html", "undecodable")
    assert "replacement" in refused.value.detail


def test_a_utf16_label_in_a_meta_means_utf8() -> None:
    assert declared_charset(b'<meta charset="UTF-16LE">') == "utf-8"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([("koi8-r", "koi8-r"), ("windows-1251", "cp1251"),
                        ("shift_jis", "cp932"), ("windows-1252", "cp1252"),
                        ("utf-8", "utf-8")]),
       st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=20),
       st.sampled_from(["Привет", "日本語", "café", "plain"]))
def test_a_declared_page_reads_back_exactly(declared: tuple[str, str], ascii_word: str,
                                            word: str) -> None:
    label, codec = declared
    body = f"{ascii_word} {word}"
    try:
        payload = page(body, head=f'<meta charset="{label}">').encode(codec)
    except UnicodeEncodeError:
        return  # the word has no bytes in that encoding

    assert read_html(payload).text == page(body, head=f'<meta charset="{label}">')
