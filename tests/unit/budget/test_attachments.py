"""Attached files as content blocks: read through the guard, cached by content hash."""

from __future__ import annotations

import base64

import pytest

from capsa.budget import Budget
from capsa.budget.attachments import (
    ExtractionCache,
    attachment_context,
    block_filename,
    read_file_block,
)
from capsa.guard import Extracted, Omission
from capsa.guard.extractors import PlainTextExtractor


class CountingExtractor(PlainTextExtractor):
    """Plain-text extraction that counts its calls."""

    calls = 0

    def extract(self, *args: object, **kwargs: object) -> str:
        type(self).calls += 1
        return super().extract(*args, **kwargs)  # type: ignore[arg-type]


def file_block(name: str, data: bytes, mime: str = "text/plain") -> dict[str, object]:
    return {"type": "file", "base64": base64.b64encode(data).decode(), "mime_type": mime,
            "filename": name}


def test_read_file_block_extracts_inline_data_through_the_guard() -> None:
    outcome = read_file_block(file_block("note.txt", b"The hotel cap is EUR 165."),
                              extractor=PlainTextExtractor())
    assert isinstance(outcome, Extracted) and outcome.text == "The hotel cap is EUR 165."
    assert outcome.label == "note.txt"


def test_read_file_block_never_fetches_a_url() -> None:
    outcome = read_file_block({"type": "file", "url": "https://example.com/x.pdf"})
    assert isinstance(outcome, Omission) and outcome.reason == "not_fetched"
    assert "never fetches" in outcome.detail


def test_read_file_block_reports_undecodable_base64_as_corrupt() -> None:
    outcome = read_file_block({"type": "file", "base64": "not base64!", "filename": "x.txt"})
    assert isinstance(outcome, Omission) and outcome.reason == "corrupt"


def test_read_file_block_records_a_guard_refusal_as_an_omission() -> None:
    outcome = read_file_block(file_block("empty.txt", b""), extractor=PlainTextExtractor())
    assert isinstance(outcome, Omission) and outcome.label == "empty.txt"


def test_read_file_block_extracts_a_file_once_with_a_cache() -> None:
    CountingExtractor.calls = 0
    cache = ExtractionCache()
    block = file_block("note.txt", b"The hotel cap is EUR 165.")
    first = read_file_block(block, cache=cache, extractor=CountingExtractor())
    again = read_file_block(block, cache=cache, extractor=CountingExtractor())
    assert first == again and CountingExtractor.calls == 1


def test_extraction_cache_drops_the_least_recently_used() -> None:
    cache = ExtractionCache(size=2)
    outcomes = {key: Omission(label=key, stage="size", reason="empty", detail="")
                for key in "abc"}
    cache.put("a", outcomes["a"])
    cache.put("b", outcomes["b"])
    assert cache.get("a") is outcomes["a"]  # a is now the most recent
    cache.put("c", outcomes["c"])
    assert cache.get("b") is None and len(cache) == 2


def test_extraction_cache_refuses_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="size=0"):
        ExtractionCache(size=0)


def test_block_filename_looks_where_providers_put_it() -> None:
    assert block_filename({"metadata": {"filename": "a.pdf"}}) == "a.pdf"
    assert block_filename({"name": "b.pdf"}) == "b.pdf"
    assert block_filename({}) == ""


def test_attachment_context_accepts_a_list_returning_tokenizer() -> None:
    note = read_file_block(file_block("note.txt", b"The hotel cap is EUR 165. " * 20),
                           extractor=PlainTextExtractor())
    assert isinstance(note, Extracted)
    context = attachment_context("hotel cap", [note], [], Budget(max_tokens=60),
                                 tokenizer=str.split)
    assert len(context.text.split()) <= 60


def test_an_attached_file_is_named_in_the_compact_markup_too() -> None:
    from capsa.budget import Budget
    from capsa.budget.attachments import attachment_context
    from capsa.guard import Extracted

    one = Extracted(label='q3 "final".txt', kind="text", media_type=None,
                    text="The hotel cap is EUR 165 a night.", byte_size=33, sha256="ab" * 32)
    for markup in ("compact", "tags"):
        text = attachment_context("hotel cap", [one], [],
                                  Budget(max_tokens=200, markup=markup)).text
        assert "q3 &quot;final&quot;.txt" in text
        assert "abab" not in text
