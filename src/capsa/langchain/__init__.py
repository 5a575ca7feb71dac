"""LangChain adapters: loaders, compressors, retrievers, agent middleware.

Each name is imported on first use, so `from capsa.langchain import CapsaLoader`
needs only `langchain-core`; the agent middleware also needs `langchain`.
Install with ``pip install 'capsa[langchain]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capsa._lazy import lazy_getattr, require

require("langchain_core", "langchain", "capsa.langchain")

_NAMES = {
    "CapsaBlobParser": "loaders",
    "CapsaLoader": "loaders",
    "CapsaCompressor": "compressors",
    "BudgetedRetriever": "retrievers",
    "ScoredRetriever": "retrievers",
    "format_packet": "compressors",
    "budget_for_model": "compressors",
    "AttachmentMiddleware": "attachments",
    "CitationCapsuleMiddleware": "middleware",
    "CitationCapsuleEdit": "middleware",
    "capsule_messages": "middleware",
    "capsa_retriever_tool": "middleware",
    "cite_tool": "middleware",
    "recall_tool": "middleware",
    "ShadowRetriever": "shadow",
    "ShadowMiddleware": "shadow",
}

__all__ = sorted(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)

if TYPE_CHECKING:  # type checkers see the real classes; runtime imports lazily
    from capsa.langchain.attachments import AttachmentMiddleware as AttachmentMiddleware
    from capsa.langchain.compressors import CapsaCompressor as CapsaCompressor
    from capsa.langchain.compressors import budget_for_model as budget_for_model
    from capsa.langchain.compressors import format_packet as format_packet
    from capsa.langchain.loaders import CapsaBlobParser as CapsaBlobParser
    from capsa.langchain.loaders import CapsaLoader as CapsaLoader
    from capsa.langchain.middleware import CitationCapsuleEdit as CitationCapsuleEdit
    from capsa.langchain.middleware import CitationCapsuleMiddleware as CitationCapsuleMiddleware
    from capsa.langchain.middleware import capsa_retriever_tool as capsa_retriever_tool
    from capsa.langchain.middleware import capsule_messages as capsule_messages
    from capsa.langchain.middleware import cite_tool as cite_tool
    from capsa.langchain.middleware import recall_tool as recall_tool
    from capsa.langchain.retrievers import BudgetedRetriever as BudgetedRetriever
    from capsa.langchain.retrievers import ScoredRetriever as ScoredRetriever
    from capsa.langchain.shadow import ShadowMiddleware as ShadowMiddleware
    from capsa.langchain.shadow import ShadowRetriever as ShadowRetriever
