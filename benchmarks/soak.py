"""Soak: thousands of generated attachments through `extract_many` while parsers misbehave.

Every attachment is built in code: good files of every kind capsa extracts,
each carrying a token unique to it (``ZQX000042``), and hostile ones (zip
bombs, an OOXML bomb, nested zips, type mismatches, empty, oversize and
binary files). They stream through `extract_many` over an `IsolatedExtractor`
whose parser is a `FaultInjectingExtractor` around the real `Router`: a
seeded share of payloads hang, crash, segfault, allocate without bound, raise
or return garbage instead of being parsed. Because the fault is a pure
function of the payload and the seed, this process knows each file's fate in
advance and checks every outcome against it:

- every input ends in exactly one outcome;
- a good file that drew no fault is extracted, its text carries its own
  token and no other file's token, and its sha256 is its own;
- a good file that drew a fault is omitted with the cause that fault maps to;
- a hostile file is omitted with one of the reasons its shape allows.

While it runs, a sampler records the processes descended from this one
(the pool's workers, their per-file children, Tesseract under those) and this
process's resident memory, every quarter second. The generators (python-docx,
python-pptx, openpyxl, Pillow) run in this process and grow its heap a little
as they go, so a second "replay" run cycles a few hundred attachments built up
front: its memory curve is capsa's side alone. Then the first
``--throughput-n`` attachments go through a 1-worker and a 2-worker pool for
files per second.

Run ``python benchmarks/soak.py`` (10 000 attachments, about 15 minutes on 2
cores) or ``--n 500`` for a short run. Writes ``benchmarks/results/soak.json``
and ``benchmarks/results/soak.png``; nothing here asserts on time.
`tests/soak/test_soak.py` runs `soak` itself on 500 attachments and asserts
the invariants.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import random
import re
import sys
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from capsa.guard import (
    Extracted,
    ExtractionLimits,
    IsolatedExtractor,
    Omission,
    Skipped,
    extract_many,
)
from capsa.guard.extractors import (
    PlainTextExtractor,
    Router,
    TesseractExtractor,
    UnstructuredExtractor,
)
from capsa.guard.samples import pdf_with_text
from capsa.guard.testing import FaultInjectingExtractor

RESULTS = Path(__file__).resolve().parent / "results"
TOKEN = re.compile(r"ZQX\d{6}")
"""Every good file carries one token; finding another file's token is a misattribution."""

RATES: dict[str, float] = {"hang": 0.004, "crash": 0.02, "segfault": 0.02, "allocate": 0.02,
                           "raise": 0.02, "garbage": 0.02}
"""Per-payload fault probabilities: about one good file in ten misbehaves."""

LIMITS = ExtractionLimits(max_bytes=256 * 1024, timeout_s=2, cpu_s=20,
                          memory_bytes=512 * 1024 * 1024, max_pages=5)
"""Short wall clock so hangs cost little; CPU limit above it so hangs are timeouts."""

FAULT_CAUSES: dict[str, frozenset[str]] = {
    "hang": frozenset({"timeout"}),
    "crash": frozenset({"crashed"}),
    "segfault": frozenset({"crashed"}),
    "allocate": frozenset({"memory_limit", "timeout"}),  # zero-filling can outlast the clock
    "raise": frozenset({"raised"}),
    "garbage": frozenset({"protocol"}),
}
"""The `ExtractionFailed.cause` each injected fault must come back as."""

GOOD: dict[str, tuple[str, int]] = {
    "text": ("txt", 14), "markdown": ("md", 12), "csv": ("csv", 10), "json": ("json", 10),
    "html": ("html", 10), "eml": ("eml", 8), "pdf": ("pdf", 8), "rtf": ("rtf", 5),
    "docx": ("docx", 5), "xlsx": ("xlsx", 4), "pptx": ("pptx", 4), "epub": ("epub", 4),
    "png": ("png", 2),
}
"""Good kinds: file extension and relative weight (OCR is slow, so PNGs are rare)."""

HOSTILE: dict[str, tuple[str, int, frozenset[str]]] = {
    "zip_bomb": ("zip", 3, frozenset({"archive_ratio", "archive_too_large"})),
    "docx_bomb": ("docx", 3, frozenset({"archive_ratio", "archive_too_large"})),
    "nested_zip": ("zip", 2, frozenset({"nested_too_deep"})),
    "type_mismatch": ("pdf", 3, frozenset({"type_mismatch"})),
    "empty": ("txt", 2, frozenset({"empty"})),
    "oversize": ("txt", 2, frozenset({"too_large"})),
    "binary": ("bin", 2, frozenset({"unsupported_type"})),
}
"""Hostile shapes: extension, weight and the omission reasons each may be given."""

_WORDS = ("harbor", "freight", "invoice", "crane", "berth", "customs", "pallet", "manifest",
          "tariff", "quay", "ledger", "vessel", "depot", "audit", "route", "policy")


@dataclass(frozen=True)
class Case:
    """What this process knows about one generated attachment before it is extracted."""

    name: str
    shape: str
    sha256: str
    token: str | None
    expected: frozenset[str]
    """Omission reasons (or causes) allowed; empty when the file must be extracted."""
    fault: str | None


@dataclass
class Sample:
    """One sampler tick."""

    t_s: float
    processes: int
    rss_kib: int
    done: int


@dataclass
class SoakRun:
    """Everything one run measured."""

    n: int
    workers: int
    seed: int
    elapsed_s: float
    startup_s: float
    outcomes: dict[str, int]
    by_shape: dict[str, dict[str, int]]
    faults: dict[str, int]
    violations: list[str]
    baseline_processes: int
    max_processes: int
    processes_after: int
    rss_first_kib: int
    rss_warm_kib: int
    """Parent RSS once a tenth of the attachments were done (imports and pools are warm)."""
    rss_peak_kib: int
    rss_last_kib: int
    restarts: int
    samples: list[Sample] = field(default_factory=list)

    @property
    def files_per_s(self) -> float:
        """Throughput, not counting worker start-up."""
        return self.n / self.elapsed_s if self.elapsed_s else 0.0


def chaos_extractor(seed: int, rates: dict[str, float] | None = None) -> FaultInjectingExtractor:
    """The real parsers behind seeded fault injection."""
    router = Router([PlainTextExtractor(), UnstructuredExtractor(),
                     TesseractExtractor(max_pixels=LIMITS.max_pixels)])
    return FaultInjectingExtractor(router, seed=seed, rates=RATES if rates is None else rates)


def soak(n: int, *, workers: int, seed: int = 0, rates: dict[str, float] | None = None,
         limits: ExtractionLimits = LIMITS, sample_s: float = 0.25,
         distinct: int | None = None) -> SoakRun:
    """Generate `n` attachments, extract them under faults, check every outcome.

    With `distinct`, only that many attachments are generated, up front, and
    replayed under new names until `n` went through: the parent's memory then
    shows capsa's side alone, without the document generators' own growth.

    Returns the run's counts, the list of broken invariants (empty when all
    held), and the process and memory samples.
    """
    chaos = chaos_extractor(seed, rates)
    cases: dict[str, Case] = {}
    replayed = [make_case(i, seed, limits, chaos) for i in range(distinct)] if distinct else []

    def sources() -> Iterator[tuple[str, bytes]]:
        nonlocal generated
        for index in range(n):
            if replayed:
                original, payload = replayed[index % len(replayed)]
                case = replace(original, name=f"r{index:06d}-{original.name}")
            else:
                case, payload = make_case(index, seed, limits, chaos)
            cases[case.name] = case
            generated += 1
            yield case.name, payload

    _warm_up(seed, limits, chaos)
    baseline = count_descendants()
    sampler = _Sampler(sample_s)
    violations: list[str] = []
    generated = generated_done = 0
    outcomes: Counter[str] = Counter()
    by_shape: dict[str, Counter[str]] = {}
    faults: Counter[str] = Counter()
    sampler.start()
    started = time.monotonic()
    with IsolatedExtractor(chaos, workers=workers, limits=limits) as pool:
        startup = time.monotonic() - started
        began = time.monotonic()
        for outcome in extract_many(sources(), workers=workers, limits=limits, extractor=pool):
            sampler.done += 1
            case = cases.pop(outcome.label, None)  # popped: only files in flight stay in memory
            if case is None:
                violations.append(f"a second or unknown outcome for {outcome.label!r}")
                continue
            generated_done += 1
            key = _outcome_key(outcome)
            outcomes[key] += 1
            by_shape.setdefault(case.shape, Counter())[key] += 1
            if case.fault is not None:
                faults[case.fault] += 1
            violations.extend(check(case, outcome))
        elapsed = time.monotonic() - began
        restarts = pool.restarts
        sampler.sample()
    processes_after = wait_for_descendants(baseline)
    sampler.stop()
    violations.extend(f"{name} ended in no outcome" for name in cases)
    if generated != n or generated_done != n:
        violations.append(f"generated {generated} attachments, {generated_done} outcomes, "
                          f"for {n}")
    samples = sampler.samples
    rss = [s.rss_kib for s in samples] or [0]
    warm = next((s.rss_kib for s in samples if s.done >= n // 10), rss[-1])
    return SoakRun(
        n=n, workers=workers, seed=seed, elapsed_s=elapsed, startup_s=startup,
        outcomes=dict(outcomes), by_shape={k: dict(v) for k, v in sorted(by_shape.items())},
        faults=dict(faults), violations=violations, baseline_processes=baseline,
        max_processes=max((s.processes for s in samples), default=baseline),
        processes_after=processes_after, rss_first_kib=rss[0], rss_warm_kib=warm,
        rss_peak_kib=max(rss),
        rss_last_kib=rss[-1], restarts=restarts, samples=samples)


def check(case: Case, outcome: Extracted | Omission | Skipped) -> list[str]:
    """The invariants one outcome broke (an empty list when it is what `case` predicts)."""
    if isinstance(outcome, Skipped):
        return [f"{case.name}: skipped, but no manifest was given"]
    if isinstance(outcome, Omission):
        if not case.expected:
            return [f"{case.name} ({case.shape}): omitted ({outcome.stage}/{outcome.reason}: "
                    f"{outcome.detail[:120]}) but should have been extracted"]
        if outcome.reason not in case.expected:
            return [f"{case.name} ({case.shape}, fault {case.fault}): omitted as "
                    f"{outcome.reason}, expected one of {sorted(case.expected)}"]
        return []
    problems = []
    if case.expected:
        problems.append(f"{case.name} ({case.shape}, fault {case.fault}): extracted, expected "
                        f"{sorted(case.expected)}")
    if outcome.sha256 != case.sha256:
        problems.append(f"{case.name}: extracted text carries another payload's sha256")
    tokens = set(TOKEN.findall(outcome.text))
    foreign = tokens - {case.token}
    if foreign:
        problems.append(f"{case.name}: text carries other files' tokens {sorted(foreign)}")
    if case.token is not None and case.token not in tokens and case.shape != "png":
        problems.append(f"{case.name} ({case.shape}): its own token is missing from its text")
    return problems


def make_case(index: int, seed: int, limits: ExtractionLimits,
              chaos: FaultInjectingExtractor) -> tuple[Case, bytes]:
    """The attachment at `index`: the same bytes for the same index and seed, every run."""
    rng = random.Random(f"{seed}:{index}")
    shapes = [*GOOD, *HOSTILE]
    weights = [w for _, w in GOOD.values()] + [w for _, w, _ in HOSTILE.values()]
    shape = rng.choices(shapes, weights)[0]
    token = f"ZQX{index:06d}"
    if shape in GOOD:
        ext = GOOD[shape][0]
        payload = _GOOD_BUILDERS[shape](token, _sentence(rng), rng)
        fault = chaos.fault_for(payload)
        expected = FAULT_CAUSES[fault] if fault is not None else frozenset()
        return Case(f"f{index:06d}.{ext}", shape, _sha(payload), token, expected,
                    fault), payload
    ext, _, reasons = HOSTILE[shape]
    payload = _hostile(shape, index, limits)
    return Case(f"f{index:06d}.{ext}", shape, _sha(payload), None, reasons, None), payload


def _warm_up(seed: int, limits: ExtractionLimits, chaos: FaultInjectingExtractor) -> None:
    """Build one file of every shape first, so generator imports do not look like a leak."""
    rng = random.Random(seed)
    for build in _GOOD_BUILDERS.values():
        build("ZQX999999", _sentence(rng), rng)
    for index, shape in enumerate(HOSTILE):
        _hostile(shape, index, limits)


def count_descendants(root: int | None = None) -> int:
    """Processes descended from `root` (this process by default), read from /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    count, stack = 0, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            count += 1
            stack.append(child)
    return count


def wait_for_descendants(baseline: int, timeout_s: float = 10.0) -> int:
    """Wait until no more than `baseline` descendants remain; return the final count."""
    deadline = time.monotonic() + timeout_s
    count = count_descendants()
    while count > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
        count = count_descendants()
    return count


def rss_kib() -> int:
    """This process's resident set size (VmRSS), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class _Sampler(threading.Thread):
    def __init__(self, every_s: float) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.every_s = every_s
        self.samples: list[Sample] = []
        self.done = 0
        self.t0 = time.monotonic()
        self.stopping = threading.Event()

    def sample(self) -> None:
        self.samples.append(Sample(round(time.monotonic() - self.t0, 3), count_descendants(),
                                   rss_kib(), self.done))

    def run(self) -> None:
        while not self.stopping.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self.sample()


def _outcome_key(outcome: Extracted | Omission | Skipped) -> str:
    if isinstance(outcome, Extracted):
        return "extracted"
    if isinstance(outcome, Omission):
        return f"omitted:{outcome.reason}"
    return "skipped"


def _sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _sentence(rng: random.Random) -> str:
    words = rng.sample(_WORDS, k=rng.randint(4, 9))
    return " ".join(words).capitalize() + f", item {rng.randint(1, 9999)}."


def _docx(token: str, sentence: str, rng: random.Random) -> bytes:
    import docx

    document = docx.Document()
    document.add_heading(f"Memo {token}", level=1)
    for _ in range(rng.randint(1, 4)):
        document.add_paragraph(sentence)
    return _saved(document)


def _pptx(token: str, sentence: str, rng: random.Random) -> bytes:
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = f"Deck {token}"
    slide.placeholders[1].text = sentence
    return _saved(deck)


def _xlsx(token: str, sentence: str, rng: random.Random) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["ref", "note", "amount"])
    sheet.append([token, sentence, rng.randint(1, 10_000)])
    return _saved(book)


def _saved(document: Any) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return _reproducible(buffer.getvalue())


_TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def _reproducible(archive: bytes) -> bytes:
    """The same zip with fixed member dates and document timestamps.

    Office writers stamp the current time into the zip headers and
    ``docProps/core.xml``; without this the same index would give different
    bytes, and so a different fault, on every run.
    """
    source = zipfile.ZipFile(io.BytesIO(archive))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = _TIMESTAMP.sub(b"2024-01-01T00:00:00Z", data)
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            fixed.compress_type = info.compress_type
            target.writestr(fixed, data)
    return buffer.getvalue()


def _epub(token: str, sentence: str, rng: random.Random) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml",
                      '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                      'opendocument:xmlns:container"><rootfiles><rootfile full-path="c.opf" '
                      'media-type="application/oebps-package+xml"/></rootfiles></container>')
        book.writestr("c.opf",
                      '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                      'version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org'
                      f'/dc/elements/1.1/"><dc:identifier id="id">{token}</dc:identifier>'
                      "<dc:title>t</dc:title><dc:language>en</dc:language></metadata><manifest>"
                      '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>'
                      '</manifest><spine><itemref idref="c"/></spine></package>')
        book.writestr("c.xhtml",
                      '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
                      f"<title>t</title></head><body><h1>Chapter {token}</h1><p>{sentence}</p>"
                      "</body></html>")
    return _reproducible(buffer.getvalue())


def _png(token: str, sentence: str, rng: random.Random) -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (560, 100), 255)
    ImageDraw.Draw(image).text((20, 25), token, fill=0, font=ImageFont.load_default(size=44))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _text_builder(template: str) -> Any:
    return lambda token, sentence, rng: template.format(token=token, sentence=sentence).encode()


_GOOD_BUILDERS: dict[str, Any] = {
    "text": _text_builder("Note {token}\n\n{sentence}\n"),
    "markdown": _text_builder("# Note {token}\n\n- {sentence}\n"),
    "csv": _text_builder("ref,note\n{token},\"{sentence}\"\n"),
    "json": _text_builder('{{"ref": "{token}", "note": "{sentence}"}}\n'),
    "html": _text_builder("<html><head><title>Page</title></head><body><h1>Page {token}</h1>"
                          "<p>{sentence}</p></body></html>"),
    "eml": _text_builder("From: clerk@example.com\nTo: desk@example.com\nSubject: Update "
                         "{token}\nMIME-Version: 1.0\nContent-Type: text/plain\n\n{token}: "
                         "{sentence}\n"),
    "rtf": _text_builder("{{\\rtf1\\ansi Memo {token}\\par {sentence}}}"),
    "pdf": lambda token, sentence, rng: pdf_with_text([f"Invoice {token}", sentence]),
    "docx": _docx, "pptx": _pptx, "xlsx": _xlsx, "epub": _epub, "png": _png,
}


def _hostile(shape: str, index: int, limits: ExtractionLimits) -> bytes:
    if shape == "zip_bomb":
        return _zip_bomb()
    if shape == "docx_bomb":
        return _docx_bomb()
    if shape == "nested_zip":
        return _nested_zip()
    if shape == "type_mismatch":
        return _png("ZQX-mismatch", "", random.Random(0))
    if shape == "empty":
        return b""
    if shape == "oversize":
        return b"a" * (limits.max_bytes + 1 + index % 97)
    return bytes([0, 0, 0, 0, 7, 1]) * 64 + index.to_bytes(4, "big")


@cache
def _zip_bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.txt", b"\0" * (16 * 1024 * 1024))
    return _reproducible(buffer.getvalue())


@cache
def _docx_bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document>" + " " * (16 * 1024 * 1024))
    return _reproducible(buffer.getvalue())


@cache
def _nested_zip() -> bytes:
    inner = b"hello"
    for depth in range(3):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr(f"level{depth}.zip" if depth else "note.txt", inner)
        inner = _reproducible(buffer.getvalue())
    return inner


def _environment() -> dict[str, Any]:
    import capsa

    return {
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()), "capsa": capsa.__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _summary(run: SoakRun) -> dict[str, Any]:
    data = asdict(run)
    data["files_per_s"] = round(run.files_per_s, 2)
    data["samples"] = [asdict(s) for s in run.samples]
    data["violations"] = run.violations[:50]
    data["violation_count"] = len(run.violations)
    return data


def _from_summary(data: dict[str, Any]) -> SoakRun:
    fields = {k: v for k, v in data.items() if k in SoakRun.__dataclass_fields__}
    fields["samples"] = [Sample(**sample) for sample in data["samples"]]
    return SoakRun(**fields)


def _print_run(run: SoakRun) -> None:
    print(f"\nsoak: {run.n} attachments, {run.workers} workers, seed {run.seed}")
    print(f"  {'outcome':<32}{'files':>8}")
    for key, count in sorted(run.outcomes.items(), key=lambda kv: -kv[1]):
        print(f"  {key:<32}{count:>8}")
    print(f"  {'injected faults':<32}{sum(run.faults.values()):>8}  "
          + ", ".join(f"{k} {v}" for k, v in sorted(run.faults.items())))
    print(f"  {'invariant violations':<32}{len(run.violations):>8}")
    print(f"  {'elapsed (s, after start-up)':<32}{run.elapsed_s:>8.1f}  "
          f"({run.files_per_s:.1f} files/s; start-up {run.startup_s:.1f} s)")
    print(f"  {'processes before/max/after':<32}{run.baseline_processes:>4}/"
          f"{run.max_processes}/{run.processes_after}")
    print(f"  {'parent RSS MiB start/warm/peak/end':<32}{run.rss_first_kib / 1024:>6.1f}/"
          f"{run.rss_warm_kib / 1024:.1f}/{run.rss_peak_kib / 1024:.1f}/"
          f"{run.rss_last_kib / 1024:.1f}")
    print(f"  {'workers replaced':<32}{run.restarts:>8}")
    for line in run.violations[:20]:
        print("  !", line)


def _plot(run: SoakRun, replay: SoakRun | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = 3 if replay is not None else 2
    fig, axes = plt.subplots(rows, 1, figsize=(8, 2.4 * rows + 0.6))
    t = [s.t_s for s in run.samples]
    axes[0].step(t, [s.processes for s in run.samples], where="post")
    axes[0].set_ylabel("extractor processes")
    axes[0].set_ylim(bottom=0)
    axes[0].set_title(f"soak: {run.n} attachments, {run.workers} workers, "
                      f"{sum(run.faults.values())} injected faults")
    axes[1].plot(t, [s.rss_kib / 1024 for s in run.samples])
    axes[1].set_ylabel("parent RSS (MiB)")
    axes[1].set_xlabel("seconds (soak)")
    top = 1.15 * max(s.rss_kib / 1024 for r in (run, replay) if r for s in r.samples)
    axes[1].set_ylim(0, top)
    if replay is not None:
        axes[2].plot([s.t_s for s in replay.samples], [s.rss_kib / 1024 for s in replay.samples],
                     color="tab:green")
        axes[2].set_ylabel("parent RSS (MiB)")
        axes[2].set_xlabel(f"seconds (replay of {replay.n}, no generator in the loop)")
        axes[2].set_ylim(0, top)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the soak and the throughput comparison; print tables, write JSON and a PNG."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="attachments in the soak")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--throughput-n", type=int, default=1_000,
                        help="attachments in each throughput run (0 to skip)")
    parser.add_argument("--replay-n", type=int, default=3_000,
                        help="attachments in the replay run (0 to skip)")
    parser.add_argument("--replay-distinct", type=int, default=300,
                        help="distinct attachments the replay run cycles through")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the PNG from an existing --out JSON")
    options = parser.parse_args(argv)
    if options.replot:
        saved = json.loads(options.out.read_text(encoding="utf-8"))
        _plot(_from_summary(saved["soak"]),
              _from_summary(saved["replay"]) if saved.get("replay") else None,
              options.out.with_suffix(".png"))
        return 0
    run = soak(options.n, workers=options.workers, seed=options.seed)
    _print_run(run)
    replay = None
    if options.replay_n:
        replay = soak(options.replay_n, workers=options.workers, seed=options.seed,
                      distinct=options.replay_distinct)
        print(f"\nreplay: {options.replay_distinct} pre-built attachments cycled "
              f"{options.replay_n} times (no generator in the loop)")
        _print_run(replay)
    throughput = {}
    if options.throughput_n:
        print(f"\nthroughput: the first {options.throughput_n} attachments, same faults")
        print(f"  {'workers':<10}{'files/s':>10}{'elapsed s':>12}{'violations':>12}")
        for workers in (1, 2):
            timed = soak(options.throughput_n, workers=workers, seed=options.seed)
            throughput[str(workers)] = {"files_per_s": round(timed.files_per_s, 2),
                                        "elapsed_s": round(timed.elapsed_s, 2),
                                        "violations": len(timed.violations)}
            print(f"  {workers:<10}{timed.files_per_s:>10.1f}{timed.elapsed_s:>12.1f}"
                  f"{len(timed.violations):>12}")
        speedup = throughput["2"]["files_per_s"] / max(throughput["1"]["files_per_s"], 1e-9)
        throughput["speedup"] = round(speedup, 2)
        print(f"  2 workers / 1 worker: {speedup:.2f}x")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"environment": _environment(), "rates": RATES,
              "limits": LIMITS.model_dump(mode="json"), "soak": _summary(run),
              "replay": _summary(replay) if replay is not None else None,
              "throughput": throughput}
    options.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    _plot(run, replay, options.out.with_suffix(".png"))
    print(f"\nwrote {options.out} and {options.out.with_suffix('.png')}")
    return 1 if run.violations else 0


if __name__ == "__main__":
    sys.exit(main())
