"""How long a new process waits for its first extracted file.

Each figure comes from a fresh interpreter (so nothing is warm that an
application would not have warm), timed from before ``import capsa.guard``:

- **cold text**: a 30-byte Markdown file, nothing started (goal: under 2 s);
- **warm_up**: `capsa.guard.warm_up()`, the shared pool started and self-tested;
- **text after warm_up** (goal: under 0.5 s) and **DOCX after warm_up**: the
  first file a user sends once the application has warmed up at start-up;
- **cold DOCX**: what the first user pays when nobody called `warm_up`.

Run directly, or through ``benchmarks/extraction.py``, which adds the rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "first_file.json"
DOCX = ROOT / "src" / "capsa" / "demo" / "corpus" / "data-retention.docx"
GOALS_S = {"cold_text_s": 2.0, "text_after_warm_up_s": 0.5}

_COLD = r"""
import json, sys, time
start = time.perf_counter()
from capsa.guard import Attachment, extract_attachment
name, path = sys.argv[1], sys.argv[2]
payload = open(path, "rb").read() if path else b"# notes\n\nThe office opens at nine."
extract_attachment(Attachment(label=name, payload=payload))
print(json.dumps({"seconds": time.perf_counter() - start}))
"""

_WARM = r"""
import json, sys, time
start = time.perf_counter()
from capsa.guard import Attachment, extract_attachment, warm_up
warm_up()
warmed = time.perf_counter()
extract_attachment(Attachment(label="a.md", payload=b"# notes\n\nThe office opens at nine."))
text = time.perf_counter()
extract_attachment(Attachment(label="a.docx", payload=open(sys.argv[1], "rb").read()))
docx = time.perf_counter()
print(json.dumps({"warm_up_s": warmed - start, "text_after_warm_up_s": text - warmed,
                  "docx_after_warm_up_s": docx - text}))
"""


def _run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, check=True, cwd=ROOT, env={**os.environ})
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure() -> dict[str, Any]:
    """Every figure, each from its own fresh interpreter."""
    result: dict[str, Any] = {"cold_text_s": _run(_COLD, "a.md", "")["seconds"]}
    result.update(_run(_WARM, str(DOCX)))
    result["cold_docx_s"] = _run(_COLD, "a.docx", str(DOCX))["seconds"]
    result["goals_s"] = GOALS_S
    result["met"] = {name: result[name] < goal for name, goal in GOALS_S.items()}
    return result


def print_table(result: dict[str, Any]) -> None:
    """The rows, as a small table."""
    print("\nFirst file in a new process (seconds, each from a fresh interpreter)")
    rows = [("cold: 30-byte Markdown", "cold_text_s"), ("warm_up()", "warm_up_s"),
            ("text after warm_up", "text_after_warm_up_s"),
            ("DOCX after warm_up", "docx_after_warm_up_s"), ("cold: DOCX", "cold_docx_s")]
    for title, key in rows:
        goal = GOALS_S.get(key)
        verdict = "" if goal is None else \
            f"   (goal < {goal} s: {'met' if result[key] < goal else 'MISSED'})"
        print(f"{title:<28}{result[key]:>8.3f}{verdict}")


def main() -> None:
    """Measure, print, write JSON."""
    result = measure()
    print_table(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
