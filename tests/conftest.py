"""Suite-wide settings: every test runs offline (pytest-socket, see pyproject.toml)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

import pytest

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")


class _WaitsForTheLoop:
    """Plain text that cannot finish until a coroutine has run while it was parsing.

    Its `extract` sets `started` and then waits for `loop_ran`, which only a
    coroutine on the event loop sets (see `loop_probe`). Run on the loop's own
    thread, it would wait out its timeout and raise: the file is then
    omitted, which the async tests assert cannot happen.
    """

    kinds = frozenset({"text", "markdown"})

    def __init__(self) -> None:
        import threading

        self.started = threading.Event()
        self.loop_ran = threading.Event()

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        self.started.set()
        if not self.loop_ran.wait(timeout=20):
            raise RuntimeError("the event loop never ran while this file was parsed")
        return payload.decode()


@pytest.fixture
def loop_probe() -> tuple[_WaitsForTheLoop, Callable[[], Awaitable[None]]]:
    """An in-process extractor and the coroutine that releases it from the event loop."""
    extractor = _WaitsForTheLoop()

    async def other_coroutine() -> None:
        while not extractor.started.is_set():
            await asyncio.sleep(0.001)
        extractor.loop_ran.set()

    return extractor, other_coroutine
