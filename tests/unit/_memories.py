"""One memory per backend (in memory, SQLite, FalkorDB when ``MNEMIS_FALKORDB_URL`` is set), for
engine tests that must hold on each: import ``backend`` into a test module to use it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from falkordb_server import server_url

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder


@dataclass
class Backend:
    name: str
    _open: Callable[[], MnemisMemory]
    opened: list[MnemisMemory] = field(default_factory=list)

    def open(self) -> MnemisMemory:
        """A memory on this backend's store; a second call opens the same store again (a reopen),
        except in memory, where the one memory is the store."""
        mem = self._open()
        self.opened.append(mem)
        return mem

    @property
    def reopens(self) -> bool:
        return self.name != "memory"


# Every backend a store test runs on; FalkorDB only when the server is there.
ALL_BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("falkordb", marks=[pytest.mark.falkordb, pytest.mark.enable_socket]),
]


@pytest.fixture(params=ALL_BACKENDS)
def backend(request, tmp_path):
    if request.param == "memory":
        only = MnemisMemory(embedder=HashingEmbedder())
        b = Backend("memory", lambda: only)
    elif request.param == "sqlite":
        b = Backend("sqlite", lambda: MnemisMemory(tmp_path / "m.db", embedder=HashingEmbedder()))
    else:
        url = server_url()
        b = Backend("falkordb", lambda: MnemisMemory(backend=url, embedder=HashingEmbedder()))
        for ns in b.open().namespaces():
            b.opened[0].delete_namespace(ns)
    yield b
    if b.name == "falkordb":
        for ns in b.opened[0].namespaces():
            b.opened[0].delete_namespace(ns)
    for mem in b.opened:
        mem.close()
