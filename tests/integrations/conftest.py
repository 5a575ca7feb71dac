"""What the adapters' async tests share: a watch on the event loop while capsa packs."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from pydoc_data.topics import topics
from typing import Any, TypeVar

import pytest

from capsa.budget import estimate_tokens

T = TypeVar("T")

_BENCHMARK_DATA = Path(__file__).parents[2] / "benchmarks" / "data"

_TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")


class LoopWatch:
    """A ticker on the event loop, and what it had counted at each token count.

    `tokenizer` is handed to the adapter under test: each call notes the
    ticker's count, the thread and the tenant (a context variable the test
    sets with `enter`) it runs in. If packing ran on the loop, the ticker could
    not move between the first and the last count.
    """

    @staticmethod
    def large_texts(count: int = 40) -> list[str]:
        """About 400 KB of real prose and code (the Python manual), in `count` documents."""
        manual = [topics[key] for key in sorted(topics)]
        return ["\n\n".join(manual[n::count]) for n in range(count)]

    @staticmethod
    def enter(tenant: str) -> None:
        """Set the tenant context variable for the rest of the test's task."""
        _TENANT.set(tenant)

    def __init__(self) -> None:
        self.ticks = 0
        self.seen: list[int] = []
        self.threads: set[int] = set()
        self.tenants: set[str] = set()

    def tokenizer(self, text: str) -> int:
        self.seen.append(self.ticks)
        self.threads.add(threading.get_ident())
        self.tenants.add(_TENANT.get())
        return estimate_tokens(text)

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable` while a task ticks the loop as often as it gets to run."""
        done = asyncio.Event()

        async def tick() -> None:
            while not done.is_set():
                self.ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        try:
            return await awaitable
        finally:
            done.set()
            await ticker

    @property
    def ticks_while_packing(self) -> int:
        """How far the ticker moved between the first and the last token count."""
        return self.seen[-1] - self.seen[0] if self.seen else 0


@pytest.fixture
def loop_watch() -> LoopWatch:
    return LoopWatch()


@pytest.fixture(scope="session")
def manual_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """`real_text_files` in a folder of the session's own."""
    return real_text_files(tmp_path_factory.mktemp("manual"))


@pytest.fixture(scope="session")
def manual_queries() -> list[str]:
    """The hand-written questions about the Python manual from the benchmark's QA set."""
    lines = (_BENCHMARK_DATA / "pydocs-qa.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line)["question_text"] for line in lines if line.strip()]


def real_text_files(directory: Path) -> list[Path]:
    """Real prose as files a user would load: Python manual topics, one file and its copy.

    Six files of the manual's topics (what ``help()`` shows), each long enough
    for a splitter's default chunk size to cut it with overlap, and a copy of
    the first under another name, as real folders hold (a licence under two
    names, a report saved twice).
    """
    names = sorted(topics)
    paths = []
    for n in range(6):
        path = directory / f"manual-{n}.txt"
        path.write_text("\n\n".join(topics[key] for key in names[n * 6:(n + 1) * 6]), "utf-8")
        paths.append(path)
    copy = directory / "manual-0-copy.txt"
    copy.write_bytes(paths[0].read_bytes())
    return [*paths, copy]


@pytest.fixture
async def sql_memory() -> AsyncIterator[Callable[..., Any]]:
    """LlamaIndex's `Memory.from_defaults` (SQLite in memory), its engines disposed afterwards."""
    from llama_index.core.memory import Memory

    made: list[Memory] = []

    def make(**kwargs: Any) -> Memory:
        memory = Memory.from_defaults(token_limit=1_000_000, **kwargs)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        engine = memory.sql_store._async_engine  # Memory offers no close(); dispose its pool
        if engine is not None:
            await engine.dispose()
