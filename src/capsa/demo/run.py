"""`capsa demo`: the offline end-to-end story on the bundled sample corpus.

Step 1, guarded extraction: every corpus file goes through the isolated
parser pool; the good files become text, the two hostile ones are refused
with their reasons.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from capsa.demo.corpus_source import CORPUS_DIR, DOCUMENTS, HOSTILE_FILES
from capsa.guard import (
    Attachment,
    ExtractionResult,
    extract_all,
    media_type_for_name,
    read_bounded,
)

__all__ = ["corpus_attachments", "extract_corpus", "main"]


def corpus_attachments(directory: Path = CORPUS_DIR) -> list[Attachment]:
    """The sample corpus as attachments: the documents, then the hostile files."""
    names = [d.name for d in DOCUMENTS] + [h.name for h in HOSTILE_FILES]
    return [Attachment(label=name, media_type=media_type_for_name(name),
                       payload=read_bounded(directory / name)) for name in names]


def extract_corpus() -> ExtractionResult:
    """Extract the whole sample corpus through the default isolated pool."""
    return extract_all(corpus_attachments())


def main(*, json_output: bool = False) -> int:
    """Run the demo; print a rich story, or JSON with ``json_output``."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = Console()
    started = time.perf_counter()
    if not json_output:
        console.print(Panel.fit("capsa demo: guarded extraction of the sample corpus",
                                style="bold"))
    with console.status("starting isolated parser workers and extracting..."):
        result = extract_corpus()
    seconds = time.perf_counter() - started
    if json_output:
        print(json.dumps({
            "extracted": [{"label": e.label, "kind": e.kind, "chars": len(e.text),
                           "sha256": e.sha256} for e in result.extracted],
            "omitted": [o.model_dump(mode="json") for o in result.omitted],
            "seconds": round(seconds, 2),
        }, indent=2))
        return 0
    table = Table("file", "kind", "characters", "first words", title="extracted")
    for item in result.extracted:
        table.add_row(item.label, item.kind, str(len(item.text)),
                      " ".join(item.text.split()[:8]) + " ...")
    console.print(table)
    refused = Table("file", "stage", "reason", "detail", title="omitted, with reasons")
    for omission in result.omitted:
        refused.add_row(omission.label, omission.stage, omission.reason, omission.detail)
    console.print(refused)
    console.print(f"{len(result.extracted)} extracted, {len(result.omitted)} omitted, "
                  f"in {seconds:.1f} s (including worker start-up)")
    return 0
