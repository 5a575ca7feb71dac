"""`pack` and `compress_text` give byte for byte the packets recorded in `pinned.py`.

The digests were recorded before the packing path was made faster; a speed-up
that moves one byte of one packet or receipt fails here. A change meant to alter
what is packed regenerates them (see `pinned.py`).
"""

from __future__ import annotations

import json

from .pinned import PINNED, digests


def test_packets_match_the_pinned_digests() -> None:
    expected = json.loads(PINNED.read_text(encoding="utf-8"))
    actual = digests()
    assert actual.keys() == expected.keys()
    changed = sorted(key for key in expected if actual[key] != expected[key])
    assert not changed, f"{len(changed)} of {len(expected)} packets changed, first {changed[:5]}"
