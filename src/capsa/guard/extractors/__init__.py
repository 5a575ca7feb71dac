"""Format extractors behind the `TextExtractor` port, and the router between them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from capsa.errors import IngestionRejected
from capsa.guard.extractors.msg import OutlookExtractor
from capsa.guard.extractors.office import OfficeExtractor
from capsa.guard.extractors.plain import PlainTextExtractor
from capsa.guard.extractors.tesseract import TesseractExtractor
from capsa.guard.extractors.unstructured import UnstructuredExtractor
from capsa.guard.port import Parsed, TextExtractor

__all__ = [
    "OfficeExtractor", "OutlookExtractor", "PlainTextExtractor", "Router", "TesseractExtractor",
    "UnstructuredExtractor", "default_router",
]


class Router:
    """Sends each sniffed kind to the first extractor whose `kinds` names it.

    Examples:
        >>> router = Router([PlainTextExtractor()])
        >>> router.extract("markdown", None, b"# title", max_pages=1)
        '# title'
    """

    def __init__(self, extractors: Iterable[Any]) -> None:
        self.routes: dict[str, TextExtractor] = {}
        self.extractors = list(extractors)
        for extractor in self.extractors:
            for kind in sorted(getattr(extractor, "kinds", ())):
                self.routes.setdefault(kind, extractor)

    @property
    def kinds(self) -> frozenset[str]:
        """Every kind some extractor handles."""
        return frozenset(self.routes)

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Dispatch to the extractor for `kind`."""
        extractor = self.routes.get(kind)
        if extractor is None:
            raise IngestionRejected(f"no extractor handles {kind}", label="<payload>",
                                    stage="sniff", reason="unsupported_type")
        return extractor.extract(kind, media_type, payload, max_pages=max_pages)

    def in_process_route(self, kind: str, payload: bytes | None = None) -> TextExtractor | None:
        """The extractor for `kind` if it declares itself safe in process (``in_process``)
        and, where it can tell (``fits_in_process``), light enough for `payload`
        (None: for any payload of that kind)."""
        extractor = self.routes.get(kind)
        if getattr(extractor, "in_process", False) is not True:
            return None
        fits = getattr(extractor, "fits_in_process", None)
        return extractor if fits is None or fits(kind, payload) else None

    def with_limits(self, limits: Any) -> Router:
        """A router whose extractors honour per-call limits (e.g. `max_pixels`)."""
        configured = []
        for extractor in self.extractors:
            configure = getattr(extractor, "with_limits", None)
            configured.append(configure(limits) if configure is not None else extractor)
        return Router(configured)

    def self_test(self) -> dict[str, str]:
        """Every extractor's self-test, merged by kind."""
        report: dict[str, str] = {}
        for extractor in self.extractors:
            test = getattr(extractor, "self_test", None)
            if test is not None:
                report.update(test())
        return report


def default_router() -> Router:
    """Plain text, unstructured (and pypdf), Tesseract, LibreOffice/pandoc conversion and
    Outlook messages: every kind capsa extracts.

    Per-call limits such as `max_pixels` reach the extractors through
    `Router.with_limits`, so one router serves any `ExtractionLimits`.
    """
    return Router([PlainTextExtractor(), UnstructuredExtractor(), TesseractExtractor(),
                   OfficeExtractor(), OutlookExtractor()])
