"""`TextExtractor`: the one-method port every parser and the isolated pool satisfy."""

from __future__ import annotations

import pytest

from capsa.guard import IsolatedExtractor, TextExtractor
from capsa.guard.extractors import (
    PlainTextExtractor,
    Router,
    TesseractExtractor,
    UnstructuredExtractor,
)
from capsa.guard.testing import MisbehavingExtractor


@pytest.mark.parametrize(
    "extractor",
    [PlainTextExtractor(), UnstructuredExtractor(), TesseractExtractor(),
     Router([PlainTextExtractor()]), MisbehavingExtractor("echo"),
     IsolatedExtractor(PlainTextExtractor())],
    ids=lambda e: type(e).__name__,
)
def test_every_shipped_extractor_satisfies_the_port(extractor: object) -> None:
    assert isinstance(extractor, TextExtractor)


def test_an_object_without_extract_does_not_satisfy_the_port() -> None:
    class ReadsPaths:
        def parse(self, path: str) -> str:
            return path

    assert not isinstance(ReadsPaths(), TextExtractor)
