"""LlamaIndex adapters: readers, node postprocessors, memory, transforms.

Each name is imported on first use. Install with
``pip install 'capsa[llama-index]'``.
"""

from __future__ import annotations

from capsa._lazy import lazy_getattr, require

require("llama_index.core", "llama-index", "capsa.llama_index")

_NAMES = {
    "CapsaReader": "readers",
    "CapsaNodePostprocessor": "postprocessors",
    "CapsuleMemory": "memory",
    "CitationCapsuleBlock": "memory",
    "CapsaTransform": "transforms",
    "ShadowRetriever": "shadow",
}

__all__ = sorted(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)

