"""Opening one memory on either backend (imported by the reliability tests and their conftest)."""

from __future__ import annotations

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder


def open_memory(db: str) -> MnemisMemory:
    """A memory on ``db``: a SQLite path or a ``falkordb://`` URL."""
    if db.startswith("falkordb://"):
        return MnemisMemory(backend=db, embedder=HashingEmbedder())
    return MnemisMemory(path=db, embedder=HashingEmbedder())
