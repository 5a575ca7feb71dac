"""Lazy attribute loading for the adapter packages.

`capsa.langchain` and `capsa.llama_index` expose every adapter at the package
level, but importing the package must not import every framework module: a
user of the loaders should not pay for, or need, langgraph. Each name is
imported from its module on first access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a module `__getattr__` that imports `names[attr]` on first use."""

    def __getattr__(attr: str) -> Any:
        module = names.get(attr)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), attr)

    return __getattr__


def require(module: str, extra: str, feature: str) -> None:
    """Raise an `ImportError` naming the extra when `module` is not installed."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{feature} needs the {extra!r} extra: pip install 'capsa[{extra}]'"
        ) from exc
