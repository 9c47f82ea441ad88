"""LangChain and LangGraph adapters for Mnemis memory.

Each public name loads its module on first use, so importing this package costs nothing and
asks only for ``langchain-core``; the names that need more say which extra to install:

- ``MnemisRetriever``, ``create_recall_tool``, ``create_remember_tool``, ``MnemisChatMessageHistory``:
  ``[langchain]``
- ``MnemisStore``, ``MnemisSearchItem`` (LangGraph store): ``[langgraph]``
- ``MnemisMemoryMiddleware`` (``create_agent`` middleware): ``[langgraph]``
- ``mnemis_integrations.langchain.classic.MnemisClassicMemory`` (legacy ``BaseMemory``): ``[classic]``

Example:
    .. code-block:: python

        from mnemis_integrations import MnemisMemory
        from mnemis_integrations.langchain import MnemisRetriever
        docs = MnemisRetriever(memory=MnemisMemory(), namespace="u1", k=5).invoke("refund")
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError

if find_spec("langchain_core") is None:
    raise MissingDependencyError("langchain-core", "langchain")

if TYPE_CHECKING:
    from .history import MnemisChatMessageHistory
    from .middleware import MnemisMemoryMiddleware
    from .retriever import MnemisRetriever
    from .store import MnemisSearchItem, MnemisStore
    from .tools import create_recall_tool, create_remember_tool

__all__ = [
    "MnemisChatMessageHistory",
    "MnemisMemoryMiddleware",
    "MnemisRetriever",
    "MnemisSearchItem",
    "MnemisStore",
    "create_recall_tool",
    "create_remember_tool",
]

# name -> (module, the packages it needs beyond langchain-core, the extra that installs them)
_LAZY: dict[str, tuple[str, tuple[str, ...], str]] = {
    "MnemisRetriever": ("retriever", (), "langchain"),
    "create_recall_tool": ("tools", (), "langchain"),
    "create_remember_tool": ("tools", (), "langchain"),
    "MnemisChatMessageHistory": ("history", (), "langchain"),
    "MnemisStore": ("store", ("langgraph",), "langgraph"),
    "MnemisSearchItem": ("store", ("langgraph",), "langgraph"),
    "MnemisMemoryMiddleware": ("middleware", ("langgraph", "langchain"), "langgraph"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, needs, extra = _LAZY[name]
    for package in needs:
        if find_spec(package) is None:
            raise MissingDependencyError(package, extra)
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
