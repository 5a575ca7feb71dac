"""LangChain adapters: loaders, compressors, retrievers, agent middleware.

Each name is imported on first use, so `from capsa.langchain import CapsaLoader`
needs only `langchain-core`; the agent middleware also needs `langchain`.
Install with ``pip install 'capsa[langchain]'``.
"""

from __future__ import annotations

from capsa._lazy import lazy_getattr, require

require("langchain_core", "langchain", "capsa.langchain")

_NAMES = {
    "CapsaBlobParser": "loaders",
    "CapsaLoader": "loaders",
    "CapsaCompressor": "compressors",
    "BudgetedRetriever": "retrievers",
    "format_packet": "compressors",
    "AttachmentMiddleware": "attachments",
    "CitationCapsuleMiddleware": "middleware",
    "CitationCapsuleEdit": "middleware",
    "capsule_messages": "middleware",
    "capsa_retriever_tool": "middleware",
    "cite_tool": "middleware",
    "ShadowRetriever": "shadow",
}

__all__ = sorted(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)

