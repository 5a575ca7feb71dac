"""Starting the parser pool: in the background, off the event loop, one kind at a time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from capsa.errors import ExtractionFailed
from capsa.guard import ExtractionLimits, IsolatedExtractor, awarm_up
from capsa.guard import extract as extract_module
from capsa.guard.extractors import PlainTextExtractor, Router, TesseractExtractor, default_router
from capsa.guard.samples import SAMPLES

pytestmark = pytest.mark.slow

_LIMITS = ExtractionLimits.for_ingestion()


@pytest.fixture
def cold_pool() -> Iterator[IsolatedExtractor]:
    pool = IsolatedExtractor(default_router(), workers=1)
    try:
        yield pool
    finally:
        pool.close()


def test_first_file_of_a_cold_pool_waits_only_for_its_own_kinds_self_test(
        cold_pool: IsolatedExtractor) -> None:
    text = cold_pool.run("pdf", None, SAMPLES["pdf"](), _LIMITS, label="a.pdf")
    assert "capsa" in text.lower()
    (worker,) = cold_pool._all
    tested = worker.health["self_test"]
    assert tested.get("pdf") == "ok"
    assert "docx" not in tested and "xlsx" not in tested  # the slow imports come later


def test_pool_start_self_tests_every_kind_before_it_returns(
        cold_pool: IsolatedExtractor) -> None:
    cold_pool.start()
    (worker,) = cold_pool._all
    assert set(worker.health["kinds"]) <= set(worker.health["self_test"])


def test_pool_started_in_the_background_returns_at_once_and_serves_the_first_file(
        cold_pool: IsolatedExtractor) -> None:
    cold_pool.start(wait=False)
    assert cold_pool._all == []  # no worker has answered yet: nothing waited for one
    text = cold_pool.run("pdf", None, SAMPLES["pdf"](), _LIMITS, label="a.pdf")
    assert "capsa" in text.lower()


def test_lazy_pool_refuses_a_kind_whose_parser_fails_its_self_test_on_first_use() -> None:
    broken = Router([PlainTextExtractor(), TesseractExtractor(lang="no-such-language")])
    with IsolatedExtractor(broken, workers=1) as pool, \
            pytest.raises(ExtractionFailed, match="png parser failed its start-up self-test"):
        pool.run("png", None, SAMPLES["png"](), _LIMITS, label="a.png")


def test_a_custom_extractor_is_still_self_tested_whole_before_its_worker_serves() -> None:
    with IsolatedExtractor(PlainTextExtractor(), workers=1) as pool:
        (worker,) = pool._all
        assert not worker.lazy
        assert set(worker.health["self_test"]) == set(PlainTextExtractor.kinds)


async def test_awarm_up_runs_the_start_off_the_event_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    loop_ran = threading.Event()
    started: list[int] = []

    def blocking_warm_up() -> IsolatedExtractor:
        started.append(threading.get_ident())
        assert loop_ran.wait(timeout=10), "the event loop did not run during the start"
        return IsolatedExtractor(PlainTextExtractor())

    async def other_coroutine() -> None:
        while not started:
            await asyncio.sleep(0.001)
        loop_ran.set()

    monkeypatch.setattr(extract_module, "warm_up", blocking_warm_up)
    pool, _ = await asyncio.gather(awarm_up(), other_coroutine())
    assert isinstance(pool, IsolatedExtractor)
    assert started != [threading.get_ident()]


class _Uninstalled:
    """An extractor whose parser library is not installed: importing it fails."""

    kinds = ("png",)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        raise ImportError("install Tesseract: apt-get install tesseract-ocr")


def test_a_lazy_self_test_of_an_uninstalled_parser_reads_as_a_missing_extra() -> None:
    from capsa.guard.sandbox.zygote import _self_test

    report = _self_test(_Uninstalled(), "png")

    assert report == {"png": "missing_extra: install Tesseract: apt-get install tesseract-ocr"}


def test_a_lazy_missing_extra_is_refused_as_missing_extra_not_as_a_crash() -> None:
    from capsa.errors import IngestionRejected
    from capsa.guard.sandbox.pool import _self_test_refusal

    missing = _self_test_refusal("png", "missing_extra: install Tesseract", "scan.png")
    crashed = _self_test_refusal("png", "RuntimeError: boom", "scan.png")

    assert isinstance(missing, IngestionRejected)
    assert (missing.label, missing.stage, missing.reason) == ("scan.png", "parser",
                                                              "missing_extra")
    assert isinstance(crashed, ExtractionFailed) and crashed.cause == "raised"
    assert _self_test_refusal("png", "ok", "scan.png") is None
