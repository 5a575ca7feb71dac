# %% [markdown]
# # 01 · Guarded extraction
#
# Untrusted attachments become text only through bounded, isolated parsers.
# This notebook runs the bundled sample corpus (seven real documents about a
# made-up company, plus two hostile files) through `capsa.guard`, shows what was
# refused and why, and then throws a few classic hostile inputs at it.

# %%
from capsa.demo.run import corpus_attachments
from capsa.guard import extract_all

attachments = corpus_attachments()
result = extract_all(attachments)
assert len(result.extracted) + len(result.omitted) == len(attachments)

# %% [markdown]
# Every input ends in exactly one outcome. The good files, with the kind sniffed
# from their bytes:

# %%
import pandas as pd

pd.DataFrame(
    [{"file": f.label, "kind": f.kind, "bytes": f.byte_size, "characters": len(f.text)}
     for f in result.extracted]
)

# %% [markdown]
# And the refused ones, each with a reason a program can switch on and a
# sentence a person can read:

# %%
pd.DataFrame([o.model_dump() for o in result.omitted])

# %% [markdown]
# ## Zip bombs are refused from their declarations
#
# capsa reads a zip's central directory with `struct` and never inflates a byte
# to decide. A 100 GB declaration costs microseconds:

# %%
import io
import struct
import time
import zipfile

from capsa.errors import IngestionRejected
from capsa.guard import Attachment, extract_attachment


def declared_bomb(gigabytes: int) -> bytes:
    """A tiny zip whose only member declares `gigabytes` of content (zip64 extra)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("data.txt", b"tiny")
    data = bytearray(buffer.getvalue())
    central = data.find(b"PK\x01\x02")
    size = gigabytes * 10**9
    # uncompressed size 0xFFFFFFFF in the central header, the real number in a zip64 extra
    struct.pack_into("<I", data, central + 24, 0xFFFFFFFF)
    extra = struct.pack("<HHQ", 0x0001, 8, size)
    name_len = struct.unpack_from("<H", data, central + 28)[0]
    struct.pack_into("<H", data, central + 30, len(extra))
    at = central + 46 + name_len
    data[at:at] = extra
    eocd = data.find(b"PK\x05\x06")
    struct.pack_into("<I", data, eocd + 12, struct.unpack_from("<I", data, eocd + 12)[0] + len(extra))
    return bytes(data)


for gigabytes in (1, 10, 100):
    started = time.perf_counter()
    try:
        extract_attachment(Attachment(label=f"bomb-{gigabytes}GB.zip", payload=declared_bomb(gigabytes)))
    except IngestionRejected as error:
        elapsed_ms = (time.perf_counter() - started) * 1000
        print(f"{gigabytes:>4} GB: {error.reason:<18} in {elapsed_ms:.2f} ms — {error.detail}")

# %% [markdown]
# ## A parser that misbehaves cannot take the application with it
#
# `capsa.guard.testing.MisbehavingExtractor` is a parser that hangs, crashes,
# allocates without bound or reads the environment. Run through an
# `IsolatedExtractor`, each misbehaviour becomes a typed failure and the next
# file on the same pool still succeeds.

# %%
import os

from capsa.errors import ExtractionFailed
from capsa.guard import ExtractionLimits, IsolatedExtractor
from capsa.guard.testing import MisbehavingExtractor

os.environ["OPENAI_API_KEY"] = "sk-this-must-not-leak"
limits = ExtractionLimits(timeout_s=2, cpu_s=2, memory_bytes=256 * 1024 * 1024)
rows = []
for behaviour in ("hang", "allocate", "segfault", "raise", "env"):
    with IsolatedExtractor(MisbehavingExtractor(behaviour), limits=limits) as pool:
        try:
            text = pool.run("text", None, b"hostile", limits, label="hostile.txt")
            outcome = "leaked a key!" if "sk-this" in text else "ran, no secret visible"
        except ExtractionFailed as error:
            outcome = f"ExtractionFailed({error.cause})"
        after = pool.run("text", None, b"echo:next file is fine", limits, label="next.txt")
        rows.append({"behaviour": behaviour, "outcome": outcome, "next file": after})
pd.DataFrame(rows)

# %% [markdown]
# ## Where the time goes
#
# The worker pool starts once (it self-tests every parser on a trusted sample),
# then each file costs one fork plus the parse itself:

# %%
import matplotlib.pyplot as plt

from capsa.guard import default_extractor

pool = default_extractor()
timings = []
for attachment in attachments[:7]:
    started = time.perf_counter()
    extract_attachment(attachment, pool)
    timings.append((attachment.label, (time.perf_counter() - started) * 1000))
labels, millis = zip(*timings)
plt.barh(labels, millis)
plt.xlabel("milliseconds per file (warm pool)")
plt.tight_layout()
