"""shared_pool: one isolated pool per process and per set of parsers."""

from __future__ import annotations

import multiprocessing

from capsa.guard import default_extractor
from capsa.guard.extractors import PlainTextExtractor, Router
from capsa.guard.pools import shared_pool

_IN_A_POOL_WORKER = (
    "(lambda pools: (pools.shared_pool().workers, pools.shared_pool() is pools.shared_pool()))"
    "(__import__('capsa.guard.pools', fromlist=['shared_pool']))")


def test_shared_pool_is_the_same_pool_for_equal_parsers() -> None:
    first = shared_pool(Router([PlainTextExtractor()]))
    assert shared_pool(Router([PlainTextExtractor()])) is first


def test_shared_pool_is_another_pool_for_other_parsers_or_sizes() -> None:
    text = shared_pool(PlainTextExtractor())
    assert shared_pool(Router([PlainTextExtractor()])) is not text
    assert shared_pool(PlainTextExtractor(), workers=3) is not text
    assert shared_pool(PlainTextExtractor(), workers=3).workers == 3


def test_shared_pool_defaults_to_the_process_wide_pool_in_the_main_process() -> None:
    assert shared_pool() is default_extractor()


def test_shared_pool_in_a_multiprocessing_worker_has_one_parser_worker_reused() -> None:
    with multiprocessing.get_context("spawn").Pool(1) as workers:
        size, reused = workers.apply(eval, (_IN_A_POOL_WORKER,))
    assert (size, reused) == (1, True)
