"""The real-document sets' shared pool: every module gets its own, warm for its files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capsa.guard import IsolatedExtractor
from capsa.guard.extractors import default_router


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedExtractor]:
    """The default parsers in a 2-worker pool; `extract_many` brings the ingestion limits."""
    with IsolatedExtractor(default_router(), workers=2) as started:
        yield started
