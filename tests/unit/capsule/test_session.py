"""What adapters do around a question: start it, check the tools, cache pictures."""

from __future__ import annotations

import asyncio

import pytest

from capsa.capsule import EvidenceLedger, RetainedPicture
from capsa.capsule.session import PictureCache, check_tools, start_question

PICTURE = RetainedPicture(chunk_id="c1", document_id="d", ref="#/pictures/0", label="Picture")


def test_start_question_adopts_a_history_without_a_ledger():
    ledger = start_question(None, ["m0", "m1", "m2"], evidence_tools=["search"])
    assert (ledger.question, ledger.first_question, ledger.anchor) == (2, 2, "m2")
    assert ledger.evidence_tools == ("search",)


def test_start_question_resumes_a_question_in_progress():
    ledger = EvidenceLedger().begin_question(0, anchor="m0")
    assert start_question(ledger, ["m0", "m1", "m2"]) is ledger


def test_start_question_begins_where_the_last_question_ended():
    ledger = EvidenceLedger().begin_question(0, anchor="m0").end_question(3)
    assert start_question(ledger, ["m0", "m1", "m2", "m3"]).question == 3


def test_start_question_reanchors_a_history_that_was_shortened():
    ledger = EvidenceLedger().begin_question(0, anchor="m0").end_question(9)
    started = start_question(ledger, ["summary", "m8", "new"])
    assert started.question == 2 and started.first_question == 2


def test_locate_finds_the_current_question_by_its_anchor_after_summarisation():
    ledger = EvidenceLedger().begin_question(12, anchor="q")
    assert ledger.locate(["summary", "x", "q", "y"]).question == 2


def test_locate_treats_everything_as_current_when_the_anchor_is_gone():
    ledger = EvidenceLedger().begin_question(12, anchor="q")
    assert ledger.locate(["summary", "y"]).question == 0


def test_check_tools_names_an_evidence_tool_the_agent_lacks():
    with pytest.raises(ValueError, match=r"\['serach'\] are not among"):
        check_tools(["serach"], [("search", object())], {}, who="test")


def test_check_tools_names_a_clashing_tool():
    mine, theirs = object(), object()
    with pytest.raises(ValueError, match="also named 'cite'"):
        check_tools([], [("cite", theirs), ("cite", mine)], {"cite": mine}, who="test")
    check_tools([], [("cite", mine)], {"cite": mine}, who="test")


def test_picture_cache_fetches_once_per_question_and_remembers_failures():
    calls: list[str] = []

    def fetch(picture):
        calls.append(picture.ref)
        raise OSError("store down")

    cache = PictureCache(fetch)
    cache.fetch_all([PICTURE], 4)
    cache.fetch_all([PICTURE], 4)
    assert calls == ["#/pictures/0"]
    with pytest.raises(OSError, match="store down"):
        cache.lookup(4)(PICTURE)
    cache.fetch_all([PICTURE], 9)
    assert len(calls) == 2


def test_picture_cache_awaits_an_async_fetcher_and_refuses_it_on_the_sync_path():
    async def fetch(picture):
        return b"bytes"

    cache = PictureCache(fetch)
    asyncio.run(cache.afetch_all([PICTURE], 0))
    assert cache.lookup(0)(PICTURE) == b"bytes"
    cache.fetch_all([PICTURE], 1)
    with pytest.raises(TypeError, match="ainvoke"):
        cache.lookup(1)(PICTURE)
