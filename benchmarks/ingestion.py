"""Ingestion through the loaders: real documents with 1 and 2 workers, and the cold start.

Two parts, each printed as a table and written to ``benchmarks/results/ingestion.json``:

- **Throughput** (one process, one warm two-worker pool): the real-document
  set (``tests/realdocs/files`` and the PDFs of ``/work/shared/realdocs`` when
  present) behind one large generated DOCX (the slow file, first), loaded
  through `CapsaLoader` and `CapsaReader` with ``workers=1``, ``workers=2``
  in input order and ``workers=2`` as files finish. Each row gives the wall
  time, the time to the first document, when the slow file's document
  arrived and how many came before it, and the ratio of its wall time to the
  one-worker row of the same adapter, measured in the same run.
- **Cold start** (a fresh interpreter per row, timed from before
  ``import capsa``): the first document of a one-file `CapsaLoader` over the
  default pool, with the workers self-testing every kind before they serve
  (``eager``: how capsa started before lazy start) and with each kind
  self-tested on its first file (``lazy``, today's default), for a PDF and
  for a DOCX; and ``warm_up()`` of a two-worker pool both ways (lazy workers
  answer at once and self-test in parallel).

The machine may be shared: the load average before and after is recorded,
and only ratios measured in the same run should be compared. Nothing here
is asserted in tests.

Run ``python benchmarks/ingestion.py`` (``--quick`` for a smoke run: a smaller
slow file, one top-level file of each kind in ``tests/realdocs/files`` (no image), and one
repetition of the cold start, of the PDF only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "ingestion.json"
REALDOCS = (ROOT / "tests" / "realdocs" / "files", Path("/work/shared/realdocs"))
SLOW_NAME = "0-long-report.docx"
"""Sorted first, so in input order every other file waits behind it."""

_COLD = r"""
import json, sys, time
start = time.perf_counter()
if sys.argv[1] == "eager":
    import capsa.guard.sandbox.pool as pool_module
    pool_module._warms_lazily = lambda inner: False  # every kind self-tested before serving
from capsa.langchain import CapsaLoader
doc = next(iter(CapsaLoader(sys.argv[2]).lazy_load()))
print(json.dumps({"seconds": time.perf_counter() - start,
                  "label": doc.metadata["capsa_label"]}))
"""


_WARM = r"""
import json, sys, time
import capsa.guard.sandbox.pool as pool_module
if sys.argv[1] == "eager":
    pool_module._warms_lazily = lambda inner: False
from capsa.guard.extractors import default_router
start = time.perf_counter()
pool = pool_module.IsolatedExtractor(default_router(), workers=2)
pool.warm_up()
print(json.dumps({"seconds": time.perf_counter() - start}))
pool.close()
"""


_IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"})


def real_documents(*, quick: bool = False) -> list[Path]:
    """Every file of ``tests/realdocs/files`` and every PDF of ``/work/shared/realdocs``.

    With `quick`, the first file of each suffix at the top of ``tests/realdocs/files``,
    images left out: one of every kind the default pool reads without OCR (an image
    takes seconds in Tesseract on each of the six passes), without the legacy Office
    files (a LibreOffice conversion each, about a second) or the shared PDFs, which made
    six passes over the set most of a smoke run's time.
    """
    local, shared = REALDOCS
    if quick:
        first: dict[str, Path] = {}
        for path in sorted(p for p in local.iterdir() if p.is_file()):
            if path.suffix.lower() not in _IMAGE_SUFFIXES:
                first.setdefault(path.suffix.lower(), path)
        return sorted(first.values())
    found = sorted(p for p in local.rglob("*") if p.is_file())
    if shared.is_dir():
        found.extend(sorted(shared.rglob("*.pdf")))
    return found


def long_docx(pages: int) -> bytes:
    """A generated report of about `pages` pages (ten 60-word paragraphs a page)."""
    from capsa.guard.samples import docx_written_by_python_docx

    sentence = ("the harbour authority reviewed berth allocations tonnage and "
                "inspection rules for the coming season ")
    paragraph = (sentence * 5).strip()
    return docx_written_by_python_docx([f"{n}. {paragraph}" for n in range(pages * 10)])


def _timed(documents: Iterable[Any], label_of: Callable[[Any], str]) -> dict[str, Any]:
    start = time.perf_counter()
    first: float | None = None
    slow_at: float | None = None
    before_slow = 0
    count = 0
    for document in documents:
        now = time.perf_counter() - start
        first = now if first is None else first
        if label_of(document) == SLOW_NAME and slow_at is None:
            slow_at, before_slow = now, count
        count += 1
    return {"seconds": round(time.perf_counter() - start, 2),
            "first_document_s": round(first or 0.0, 2),
            "slow_file_s": round(slow_at or 0.0, 2), "documents_before_slow_file": before_slow,
            "documents": count}


def measure_throughput(paths: Sequence[Path], pool: Any) -> list[dict[str, Any]]:
    """Every adapter x (workers, order) row over `paths`, on one warm pool."""
    from capsa.langchain import CapsaLoader
    from capsa.llama_index import CapsaReader

    rows: list[dict[str, Any]] = []
    for adapter in ("CapsaLoader", "CapsaReader"):
        for workers, ordered in ((1, True), (2, True), (2, False)):
            if adapter == "CapsaLoader":
                loader = CapsaLoader(list(paths), extractor=pool, workers=workers,
                                     ordered=ordered)
                row = _timed(loader.lazy_load(), lambda d: str(d.metadata["capsa_label"]))
                omitted = len(loader.omitted)
            else:
                reader = CapsaReader(extractor=pool, workers=workers, ordered=ordered)
                row = _timed(reader.lazy_load_data(list(paths)),
                             lambda d: str(d.metadata["capsa_label"]))
                omitted = len(reader.omitted)
            rows.append({"adapter": adapter, "workers": workers,
                         "order": "input" if ordered else "as finished", **row,
                         "omitted": omitted})
    for row in rows:
        base = next(r for r in rows if r["adapter"] == row["adapter"] and r["workers"] == 1)
        row["ratio_to_one_worker"] = round(row["seconds"] / base["seconds"], 2)
    return rows


def measure_cold_start(paths: Sequence[Path], repeats: int) -> list[dict[str, Any]]:
    """Seconds from a fresh interpreter to its first document, eager and lazy start."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        for mode in ("eager", "lazy"):
            runs = []
            for _ in range(repeats):
                done = subprocess.run([sys.executable, "-c", _COLD, mode, str(path)],
                                      capture_output=True, text=True, check=True, cwd=ROOT)
                runs.append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
            rows.append({"file": path.name, "start": mode,
                         "seconds": round(sorted(runs)[len(runs) // 2], 2), "runs": len(runs)})
    for mode in ("eager", "lazy"):  # warm_up() of a two-worker pool, every kind tested
        runs = []
        for _ in range(repeats):
            done = subprocess.run([sys.executable, "-c", _WARM, mode], capture_output=True,
                                  text=True, check=True, cwd=ROOT)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
        rows.append({"file": "warm_up(), 2 workers", "start": mode,
                     "seconds": round(sorted(runs)[len(runs) // 2], 2), "runs": len(runs)})
    for row in rows:
        eager = next(r for r in rows if r["file"] == row["file"] and r["start"] == "eager")
        row["ratio_to_eager"] = round(row["seconds"] / eager["seconds"], 2)
    return rows


def measure(*, quick: bool = False) -> dict[str, Any]:
    """Both parts; the load average before and after."""
    from capsa.guard import ExtractionLimits, IsolatedExtractor
    from capsa.guard.extractors import default_router

    load_before = [round(x, 2) for x in os.getloadavg()]
    pages = 20 if quick else 120  # still the slowest file of the quick set
    with tempfile.TemporaryDirectory(prefix="capsa-ingestion-") as scratch:
        slow = Path(scratch) / SLOW_NAME
        slow.write_bytes(long_docx(pages))
        paths = [slow, *real_documents(quick=quick)]
        pool = IsolatedExtractor(default_router(), workers=2,
                                 limits=ExtractionLimits.for_ingestion())
        try:
            started = time.perf_counter()
            pool.warm_up()
            warm_up_s = round(time.perf_counter() - started, 2)
            throughput = measure_throughput(paths, pool)
        finally:
            pool.close()
        pdf = next(p for p in paths if p.suffix == ".pdf")
        docx = next(p for p in paths if p.suffix == ".docx" and p != slow)
        # a quick run starts one interpreter per row: the PDF alone, once each way
        cold = measure_cold_start([pdf] if quick else [pdf, docx], 1 if quick else 3)
    return {"files": len(paths), "slow_file_pages": pages, "warm_up_s": warm_up_s,
            "throughput": throughput, "cold_start": cold, "quick": quick,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()]}


def print_table(result: dict[str, Any]) -> None:
    """The two tables."""
    print(f"\nIngestion through the loaders: {result['files'] - 1} real documents behind a "
          f"{result['slow_file_pages']}-page DOCX (seconds; load {result['load_before'][0]}"
          f" -> {result['load_after'][0]} on {result['cpus']} CPUs)")
    print(f"{'adapter':<13}{'workers':>8}  {'order':<12}{'total':>8}{'ratio':>7}"
          f"{'first doc':>11}{'slow file':>11}{'before it':>11}{'docs':>6}{'omitted':>9}")
    for row in result["throughput"]:
        print(f"{row['adapter']:<13}{row['workers']:>8}  {row['order']:<12}"
              f"{row['seconds']:>8.2f}{row['ratio_to_one_worker']:>7.2f}"
              f"{row['first_document_s']:>11.2f}{row['slow_file_s']:>11.2f}"
              f"{row['documents_before_slow_file']:>11}"
              f"{row['documents']:>6}{row['omitted']:>9}")
    print("\nFirst document from a cold start (fresh interpreter, default pool, seconds)")
    print(f"{'file':<34}{'start':<8}{'seconds':>9}{'ratio':>7}")
    for row in result["cold_start"]:
        print(f"{row['file']:<34}{row['start']:<8}{row['seconds']:>9.2f}"
              f"{row['ratio_to_eager']:>7.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true",
                        help="a small slow file, fewer real documents, one cold run")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON path ({RESULTS})")
    args = parser.parse_args(argv)
    result = measure(quick=args.quick)
    print_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
