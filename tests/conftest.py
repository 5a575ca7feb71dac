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


class GatedExtractor:
    """Plain text; the payload ``b"slow"`` waits until `release` is set (at most 10 s).

    The tests of streaming set `release` only once the other files arrived, so
    a stream that waited for the slow file first would take the full 10 s and
    come out in the wrong order, never pass by luck of timing.
    """

    kinds = frozenset({"text", "markdown"})

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()
        self.release_after: int | None = None
        """Set `release` half a second after this many other files were parsed."""
        self._others = 0
        self._lock = threading.Lock()

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str:
        import threading

        if payload == b"slow":
            self.release.wait(timeout=10)
            return payload.decode()
        with self._lock:
            self._others += 1
            due = self._others == self.release_after
        if due:  # the others' results are handed on well before the slow file ends
            threading.Timer(0.5, self.release.set).start()
        return payload.decode()


@pytest.fixture
def gated() -> GatedExtractor:
    """An in-process extractor whose ``b"slow"`` file finishes only when released."""
    return GatedExtractor()


class PhotoMailExtractor:
    """A trusted test parser: a ``MAIL:`` text file carries ``profilephoto.png``, which
    has no text, as an e-mail with a profile photo attached does."""

    kinds = frozenset({"text", "png"})

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> object:
        from capsa.guard import EmbeddedFile, Parsed

        if kind == "png":
            return ""
        if not payload.startswith(b"MAIL:"):
            return payload.decode()
        photo = EmbeddedFile(name="profilephoto.png", media_type="image/png",
                             payload=b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
        return Parsed(payload[5:].decode(), embedded=(photo,))


@pytest.fixture
def photo_mail() -> PhotoMailExtractor:
    """An in-process extractor over text files, some of which carry a photo without text."""
    return PhotoMailExtractor()


@pytest.fixture
def photo_eml() -> bytes:
    """A real e-mail whose only attachment, ``profilephoto.png``, is a blank image: no text."""
    import io
    from email.message import EmailMessage

    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(image, "PNG")
    message = EmailMessage()
    message["From"], message["To"] = "ana@example.org", "staff@example.org"
    message["Subject"] = "New photo"
    message.set_content("Here is my new profile photo for the staff page.")
    message.add_attachment(image.getvalue(), maintype="image", subtype="png",
                           filename="profilephoto.png")
    return bytes(message)


class Otel:
    """What capsa sent to OpenTelemetry during one test: finished spans and counter totals."""

    def __init__(self, exporter: object, reader: object) -> None:
        self.exporter, self.reader = exporter, reader

    def spans(self, name: str | None = None) -> list[object]:
        finished = self.exporter.get_finished_spans()  # type: ignore[attr-defined]
        return [s for s in finished if name is None or s.name == name]

    def counts(self, name: str) -> dict[tuple[tuple[str, object], ...], int]:
        """The counter's cumulative value per attribute set, as of now."""
        data = self.reader.get_metrics_data()  # type: ignore[attr-defined]
        found: dict[tuple[tuple[str, object], ...], int] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            found[tuple(sorted(point.attributes.items()))] = point.value
        return found


@pytest.fixture(scope="session")
def _otel_providers() -> tuple[object, object]:
    """The SDK's in-memory exporter and metric reader, installed as the global providers once.

    OpenTelemetry lets a process set its global providers once, so every test
    that asks for `otel` shares them; the exporter records only while such a
    test runs, so the rest of the suite does not pile up spans.
    """
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class SwitchedExporter(InMemorySpanExporter):
        recording = False

        def export(self, spans):  # type: ignore[no-untyped-def]
            return super().export(spans) if self.recording else SpanExportResult.SUCCESS

    exporter = SwitchedExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return exporter, reader


@pytest.fixture
def otel(_otel_providers: tuple[object, object]):  # type: ignore[no-untyped-def]
    """Spans and counters capsa emits during this test (needs opentelemetry-sdk)."""
    exporter, reader = _otel_providers
    exporter.clear()  # type: ignore[attr-defined]
    exporter.recording = True  # type: ignore[attr-defined]
    yield Otel(exporter, reader)
    exporter.recording = False  # type: ignore[attr-defined]
    exporter.clear()  # type: ignore[attr-defined]
