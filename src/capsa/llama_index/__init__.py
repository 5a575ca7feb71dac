"""LlamaIndex adapters: readers, node postprocessors, memory, transforms.

Each name is imported on first use. Install with
``pip install 'capsa[llama-index]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capsa._lazy import lazy_getattr, require

require("llama_index.core", "llama-index", "capsa.llama_index")

_NAMES = {
    "CapsaAttachments": "attachments",
    "CapsaDirectoryReader": "readers",
    "CapsaReader": "readers",
    "CapsaNodePostprocessor": "postprocessors",
    "budget_for_llm": "postprocessors",
    "CapsuleMemory": "memory",
    "CitationCapsuleBlock": "memory",
    "capsule_cite_tool": "memory",
    "capsule_recall_tool": "memory",
    "capsule_retriever_tool": "memory",
    "CapsaTransform": "transforms",
    "ShadowRetriever": "shadow",
    "ShadowEventHandler": "shadow",
}

__all__ = sorted(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)

if TYPE_CHECKING:  # type checkers see the real classes; runtime imports lazily
    from capsa.llama_index.attachments import CapsaAttachments as CapsaAttachments
    from capsa.llama_index.memory import CapsuleMemory as CapsuleMemory
    from capsa.llama_index.memory import CitationCapsuleBlock as CitationCapsuleBlock
    from capsa.llama_index.memory import capsule_cite_tool as capsule_cite_tool
    from capsa.llama_index.memory import capsule_recall_tool as capsule_recall_tool
    from capsa.llama_index.memory import capsule_retriever_tool as capsule_retriever_tool
    from capsa.llama_index.postprocessors import CapsaNodePostprocessor as CapsaNodePostprocessor
    from capsa.llama_index.postprocessors import budget_for_llm as budget_for_llm
    from capsa.llama_index.readers import CapsaDirectoryReader as CapsaDirectoryReader
    from capsa.llama_index.readers import CapsaReader as CapsaReader
    from capsa.llama_index.shadow import ShadowEventHandler as ShadowEventHandler
    from capsa.llama_index.shadow import ShadowRetriever as ShadowRetriever
    from capsa.llama_index.transforms import CapsaTransform as CapsaTransform
