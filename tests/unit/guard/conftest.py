"""Shared fixtures for the guard's unit tests: warm pools that are costly to start twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capsa.guard import IsolatedExtractor
from capsa.guard.extractors import PlainTextExtractor


@pytest.fixture(scope="session")
def plain_pool() -> Iterator[IsolatedExtractor]:
    """One isolated worker running the plain-text extractor, shared by the session."""
    with IsolatedExtractor(PlainTextExtractor()) as pool:
        yield pool
