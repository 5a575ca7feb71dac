"""How fast an oversized file is refused by its pre-parse count, against parsing it.

For each format with a count before (or, for PDF, during) parsing, one
ordinary file built with `capsa.guard.samples` holds about four times (twice
with ``--quick``) the attachment preset's `max_text_chars`. Two timings, in this process and in
the same run, through the code a worker runs (`UnstructuredExtractor`):

- **refused**: `with_limits(ExtractionLimits.for_attachments())`; the file is
  refused as ``text_too_long`` (goal: under 100 ms);
- **parsed**: the same extractor with no text ceiling, which parses the whole
  file as it would have without the count.

HTML is counted on the tree libxml2 builds (the same parse unstructured
starts with, milliseconds per megabyte), before unstructured's own element
classification, which is where its time goes. PDF has no count before
parsing (text is only known once content streams are decoded); pypdf
extracts page by page and stops at the page that passes the limit, so its
refusal is proportional to the limit but is extraction work. Its row is
shown, and left out of the under-100-ms verdict.

The ratio is parsed / refused. Printed as a table and written to
``benchmarks/results/preparse.json``. Run directly, or through
``benchmarks/extraction.py``, which adds the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "preparse.json"
TARGET_MS = 100.0
"""An oversized file should be refused by its count faster than this."""

_SENTENCE = "The harbour master logged the tide, the berth and the cargo of each vessel. "


def _paragraphs(chars: int) -> list[str]:
    """Numbered paragraphs of prose, about `chars` characters in all."""
    per = len(_SENTENCE) * 6
    return [f"{n}. " + _SENTENCE * 6 for n in range(chars // per + 1)]


def oversized_files(chars: int) -> dict[str, bytes]:
    """One ordinary file per counted format, each with about `chars` characters of text."""
    from capsa.guard import samples

    paragraphs = _paragraphs(chars)
    chapters = [paragraphs[i:i + 40] for i in range(0, len(paragraphs), 40)]
    slides = [[f"Berth report {n}", *paragraphs[i:i + 4]]
              for n, i in enumerate(range(0, len(paragraphs), 4))]
    rows = [[f"vessel {n}", text[:60], text[60:200], n] for n, text in enumerate(paragraphs * 2)]
    pages = [paragraph[:90] for paragraph in paragraphs for _ in range(5)]
    return {
        "docx": samples.docx_written_by_python_docx(paragraphs),
        "pptx": samples.pptx_with_texts(slides),
        "xlsx": samples.xlsx_with_cells(rows),
        "epub": samples.epub_chapters(chapters),
        "html": samples.html_page(["Harbour log", *paragraphs]),
        "pdf": samples.pdf_with_text(pages),
    }


def _timed(call: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    seconds: list[float] = []
    outcome: Any = None
    for _ in range(runs):
        began = time.perf_counter()
        try:
            outcome = call()
        except Exception as error:  # the refusal is the outcome measured
            outcome = error
        seconds.append(time.perf_counter() - began)
    return seconds, outcome


def _ms(seconds: Sequence[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def measure(*, quick: bool = False) -> dict[str, Any]:
    """Refusal and parse times per format, with the ratio and the refusal's detail."""
    from capsa.guard import ExtractionLimits
    from capsa.guard.extractors import UnstructuredExtractor

    loadavg_start = [round(x, 2) for x in os.getloadavg()]
    limits = ExtractionLimits.for_attachments()
    extractor = UnstructuredExtractor(ocr_pdf=False)
    extractor.self_test()  # every lazy import warm, as in a worker
    guarded = extractor.with_limits(limits)
    unlimited = guarded.with_limits(limits.model_copy(update={
        "max_text_chars": 10**9, "max_pages": 10_000, "max_uncompressed_bytes": 1 << 30}))
    rows = []
    for kind, payload in oversized_files((2 if quick else 4) * limits.max_text_chars).items():
        def refuse(kind: str = kind, payload: bytes = payload) -> Any:
            return guarded.extract(kind, None, payload, max_pages=10_000)

        def parse(kind: str = kind, payload: bytes = payload) -> Any:
            return unlimited.extract(kind, None, payload, max_pages=10_000)

        refused_s, refusal = _timed(refuse, 3 if quick else 7)
        parsed_s, parsed = _timed(parse, 1 if quick else 3)
        text = parsed if isinstance(parsed, str) else getattr(parsed, "text", "")
        rows.append({
            "kind": kind, "bytes": len(payload), "parsed_chars": len(text),
            "refused_ms": _ms(refused_s), "parsed_ms": _ms(parsed_s),
            "ratio": round(statistics.median(parsed_s) / statistics.median(refused_s), 1),
            "reason": getattr(refusal, "reason", type(refusal).__name__),
            "detail": getattr(refusal, "detail", str(refusal))[:200],
            "counted": "while extracting" if kind == "pdf" else "before parsing",
            "under_target": _ms(refused_s) < TARGET_MS,
        })
    return {"loadavg_start": loadavg_start,
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "limits": "ExtractionLimits.for_attachments()",
            "max_text_chars": limits.max_text_chars, "target_ms": TARGET_MS, "rows": rows}


def print_table(report: dict[str, Any]) -> None:
    """The rows as a plain table, then the verdict."""
    print(f"\nOversized files refused by their pre-parse count (max_text_chars "
          f"{report['max_text_chars']}), vs parsing them; ms, medians")
    header = ["kind", "KB", "chars parsed", "refused ms", "parsed ms", "ratio", "reason",
              "counted"]
    lines = [[r["kind"], str(r["bytes"] // 1000), str(r["parsed_chars"]), str(r["refused_ms"]),
              str(r["parsed_ms"]), f"{r['ratio']}x", r["reason"], r["counted"]]
             for r in report["rows"]]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    for row in [header, *lines]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    counted = [r for r in report["rows"] if r["counted"] == "before parsing"]
    met = all(r["under_target"] and r["reason"] == "text_too_long" for r in counted)
    print(f"{', '.join(r['kind'] for r in counted)} over the limit refused as text_too_long "
          f"before parsing in under {report['target_ms']:.0f} ms: {'met' if met else 'NOT met'}")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON path ({RESULTS})")
    args = parser.parse_args(argv)
    report = measure(quick=args.quick)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
