"""A parser that answers in ways only a taken-over child would: oversized, deep, or teeming.

`ReplyProbeExtractor` reads a JSON payload ``{"probe": NAME, ...}``:

- ``wide``: returns `chars` copies of a 4-byte character (the reply's size
  is what the application pays to read);
- ``raw``: skips capsa's reply writer and writes `frame` (hex) to every pipe
  it holds, then exits, as code a crafted file controls can;
- ``embed``: returns text and the embedded files listed in `files` (each a
  name, a media type and a payload, which may itself be a probe);
- ``sleep``: sleeps `seconds` (a parse that never finishes on its own).

Any other payload is echoed. Imported by the worker at start-up, like
`hostile._probes`, so the test puts ``tests`` on the path while the pool starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

from capsa.guard.port import EmbeddedFile, Parsed


def _raw(args: dict[str, Any]) -> str:
    frame = bytes.fromhex(args["frame"])
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                os.write(int(name), frame)
    os._exit(0)


class ReplyProbeExtractor:
    """Answers as its JSON payload says; echoes anything else."""

    kinds = frozenset({"text", "markdown", "csv", "json"})

    def extract(self, kind: str, media_type: str | None, payload: bytes, *,
                max_pages: int) -> str | Parsed:
        """Answer as the payload says."""
        if not payload.startswith(b"{"):
            return payload.decode("utf-8", "replace")
        args: dict[str, Any] = json.loads(payload)
        probe = args["probe"]
        if probe == "wide":
            return "\U0001f600" * int(args["chars"])
        if probe == "raw":
            return _raw(args)
        if probe == "sleep":
            time.sleep(float(args["seconds"]))
            return "woke"
        if probe == "embed":
            files = tuple(EmbeddedFile(name=f["name"], media_type=f.get("media_type"),
                                       payload=f["payload"].encode())
                          for f in args["files"])
            return Parsed(str(args.get("text", "a file with files inside")), embedded=files,
                          encoding=args.get("encoding"))
        raise ValueError(f"no such probe: {probe}")
