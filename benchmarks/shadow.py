"""What shadow evaluation costs the served request, and how fast it captures rows.

1. **Served latency.** A LangChain baseline route that takes ``--baseline-ms``
   (20 ms by default, spent waiting as a vector store or a remote index
   would) is served alone, and through a `ShadowRetriever` whose candidate
   takes ten times as long. Requests arrive one after another, alternating
   between the two set-ups so that drift on the machine hits both alike; the
   figure is each set-up's p50 and p95 served latency and their ratio to the
   baseline alone. Sync (`invoke`, candidates in the thread pool) and async
   (`ainvoke`, candidates as tasks) are measured separately. The candidate
   cannot keep up with the traffic at a sample rate of 1, so the table also
   shows how many queries were compared and how many were dropped by the bound
   on work in flight: that is the point of the bound.
2. **Rows captured per second.** With instant routes, how many queries per
   second the recorder captures, pairs and hands to a sink, for a plain
   retrieval on both sides and for capsa's `BudgetedRetriever` as the
   candidate (its packing report observed through callbacks), each over
   20 documents per query. Measured from the first request to the end of
   `flush()`.

Run ``python benchmarks/shadow.py`` (``--quick`` for fewer requests). Writes
``benchmarks/results/shadow.json``. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from capsa.budget import Budget
from capsa.langchain import BudgetedRetriever
from capsa.langchain.shadow import ShadowRetriever
from capsa.shadow import PairedDecision

RESULTS = Path(__file__).parent / "results"
QUERY = "how long is the refund window for damaged items"


def _documents(n: int, prefix: str) -> list[Document]:
    return [
        Document(id=f"{prefix}{i}", page_content=f"Passage {i}: refunds for damaged items are "
                 f"handled within {i + 10} days by the returns desk. " * (1 + i % 3))
        for i in range(n)
    ]


DOCS = _documents(20, "d")


def _sleeper(seconds: float, docs: list[Document]) -> RunnableLambda[str, list[Document]]:
    def run(query: str) -> list[Document]:
        time.sleep(seconds)
        return docs

    async def arun(query: str) -> list[Document]:
        await asyncio.sleep(seconds)
        return docs

    return RunnableLambda(run, afunc=arun)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p95_ms": 1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "mean_ms": 1000 * statistics.fmean(ordered),
    }


def served_latency(requests: int, baseline_s: float, *, use_async: bool) -> dict[str, Any]:
    """Alternate baseline-alone and shadowed requests; time what the caller waits for."""
    baseline = _sleeper(baseline_s, DOCS[:5])
    candidate = _sleeper(10 * baseline_s, DOCS[5:10])
    rows: list[PairedDecision] = []
    shadow = ShadowRetriever(baseline=baseline, candidate=candidate, sink=rows.extend,
                             max_in_flight=8, max_workers=2, timeout_s=60)
    alone: list[float] = []
    shadowed: list[float] = []

    async def timed_async(call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        await call()
        return time.perf_counter() - start

    def timed(call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    async def run_async() -> None:
        for _ in range(requests):
            alone.append(await timed_async(lambda: baseline.ainvoke(QUERY)))
            shadowed.append(await timed_async(lambda: shadow.ainvoke(QUERY)))
        await shadow.aflush()

    if use_async:
        asyncio.run(run_async())
    else:
        for _ in range(requests):
            alone.append(timed(lambda: baseline.invoke(QUERY)))
            shadowed.append(timed(lambda: shadow.invoke(QUERY)))
        shadow.flush()
    shadow.close()
    a, s = _percentiles(alone), _percentiles(shadowed)
    counts = shadow.counts
    return {
        "path": "async" if use_async else "sync",
        "requests": requests,
        "baseline_ms": 1000 * baseline_s,
        "candidate_ms": 10_000 * baseline_s,
        "alone": a,
        "shadowed": s,
        "p50_ratio": s["p50_ms"] / a["p50_ms"],
        "p95_ratio": s["p95_ms"] / a["p95_ms"],
        "compared": counts.paired,
        "dropped_busy": counts.dropped_busy,
        "invalidated": counts.invalidated,
        "rows": len(rows),
    }


def capture_rate(queries: int, candidate_kind: str) -> dict[str, Any]:
    """Queries and rows per second through reserve, capture, pair and sink, instant routes."""
    baseline = RunnableLambda(lambda q: DOCS)
    candidate: Any = RunnableLambda(lambda q: list(reversed(DOCS)))
    if candidate_kind == "budgeted":
        candidate = BudgetedRetriever(retriever=RunnableLambda(lambda q: DOCS),
                                      budget=Budget(max_tokens=300))
    rows: list[PairedDecision] = []
    shadow = ShadowRetriever(baseline=baseline, candidate=candidate, sink=rows.extend,
                             max_in_flight=queries + 1, max_workers=2)
    start = time.perf_counter()
    for _ in range(queries):
        shadow.invoke(QUERY)
    shadow.flush()
    elapsed = time.perf_counter() - start
    shadow.close()
    counts = shadow.counts
    return {
        "candidate": candidate_kind,
        "queries": queries,
        "documents_per_query": len(DOCS),
        "paired": counts.paired,
        "rows": len(rows),
        "seconds": elapsed,
        "queries_per_s": counts.paired / elapsed,
        "rows_per_s": len(rows) / elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    """Run both figures, print them, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (smoke run)")
    parser.add_argument("--baseline-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "shadow.json")
    args = parser.parse_args(argv)
    requests, queries = (40, 100) if args.quick else (300, 500)
    load_before = os.getloadavg()
    latency = [served_latency(requests, args.baseline_ms / 1000, use_async=flag)
               for flag in (False, True)]
    rates = [capture_rate(queries, kind) for kind in ("plain", "budgeted")]
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "versions": {p: version(p) for p in ("langchain-core", "pydantic")},
        "quick": args.quick,
        "served_latency": latency,
        "capture_rate": rates,
    }
    print("Served latency: baseline alone vs with a candidate 10x slower (sample rate 1)")
    print(f"{'path':<6} {'alone p50':>10} {'alone p95':>10} {'shadow p50':>11} {'shadow p95':>11}"
          f" {'p50 x':>6} {'p95 x':>6} {'compared':>9} {'dropped':>8}")
    for r in latency:
        print(f"{r['path']:<6} {r['alone']['p50_ms']:>8.2f}ms {r['alone']['p95_ms']:>8.2f}ms"
              f" {r['shadowed']['p50_ms']:>9.2f}ms {r['shadowed']['p95_ms']:>9.2f}ms"
              f" {r['p50_ratio']:>6.3f} {r['p95_ratio']:>6.3f} {r['compared']:>9}"
              f" {r['dropped_busy']:>8}")
    print()
    print("Capture rate: instant routes, 20 documents a query, 2 workers")
    print(f"{'candidate':<10} {'queries/s':>10} {'rows/s':>10}")
    for r in rates:
        print(f"{r['candidate']:<10} {r['queries_per_s']:>10.0f} {r['rows_per_s']:>10.0f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
