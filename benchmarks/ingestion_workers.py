"""CapsaTransform in LlamaIndex's IngestionPipeline: one process against ``num_workers``.

The sample corpus's good files, copied ``--copies`` times into a scratch
folder (each copy's bytes made distinct with a trailing comment line), are
read as placeholders by `CapsaDirectoryReader(defer=True)` and run through
``IngestionPipeline(transformations=[CapsaTransform()])`` three ways, each in
a fresh interpreter so no run inherits another's warm parser pool:

- ``single``: ``run()`` in one process (the baseline);
- ``workers``: ``run(num_workers=N)`` (spawned processes, each with its own pool);
- ``workers_twice``: two ``run(num_workers=N)`` calls in one interpreter, the
  second timed (a new process pool every call: what a user batching a store sees).

Each row reports wall time, the ratio to ``single`` measured in the same
run, and the documents in and out.

Run ``python benchmarks/ingestion_workers.py`` (``--copies 4 --workers 2``
by default). Writes ``benchmarks/results/ingestion_workers.json``. Nothing
here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_RUN = r"""
import json, sys, time
from llama_index.core.ingestion import IngestionPipeline
from capsa.llama_index import CapsaDirectoryReader, CapsaTransform

def run(folder, mode, workers):
    # placeholders only: no reader but capsa's parses a byte, in this process or any
    docs = CapsaDirectoryReader(folder, defer=True).load_data()
    pipeline = IngestionPipeline(transformations=[CapsaTransform()], disable_cache=True)
    for _ in range(2 if mode == "workers_twice" else 1):
        start = time.perf_counter()
        nodes = pipeline.run(documents=docs, num_workers=None if mode == "single" else workers)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "documents_in": len(docs), "documents_out": len(nodes)}

if __name__ == "__main__":  # spawned pipeline workers import this file again
    print(json.dumps(run(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
"""

def main() -> int:
    """Run the three modes and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "ingestion_workers.json")
    options = parser.parse_args()
    from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS

    load_before = os.getloadavg()
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="capsa-bench-") as scratch:
        folder = Path(scratch) / "corpus"
        folder.mkdir()
        for copy in range(options.copies):
            for doc in DOCUMENTS:
                data = (CORPUS_DIR / doc.name).read_bytes()
                if doc.name.endswith((".md", ".txt", ".csv")):
                    data += f"\n<!-- copy {copy} -->\n".encode()
                (folder / f"{copy}-{doc.name}").write_bytes(data)
        script = Path(scratch) / "run.py"
        script.write_text(_RUN)
        for mode in ("single", "workers", "workers_twice"):
            done = subprocess.run([sys.executable, str(script), str(folder), mode,
                                   str(options.workers)], capture_output=True, text=True,
                                  check=True)
            rows[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    baseline = rows["single"]["seconds"]
    for row in rows.values():
        row["ratio_to_single"] = round(row["seconds"] / baseline, 2)
        row["seconds"] = round(row["seconds"], 2)
    print(f"{'mode':<15}{'seconds':>10}{'ratio':>8}{'docs in':>9}{'docs out':>10}")
    for mode, row in rows.items():
        print(f"{mode:<15}{row['seconds']:>10}{row['ratio_to_single']:>8}"
              f"{row['documents_in']:>9}{row['documents_out']:>10}")
    result = {"rows": rows, "copies": options.copies, "num_workers": options.workers,
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "load_before": load_before, "load_after": os.getloadavg()}
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
