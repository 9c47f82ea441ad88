"""Shared by the reliability tests that run one body on SQLite and on FalkorDB."""

from __future__ import annotations

import pytest
from _backends import open_memory
from falkordb_server import server_url


def _wipe(url: str) -> None:
    with open_memory(url) as mem:
        for ns in mem.namespaces():
            mem.delete_namespace(ns)


@pytest.fixture(
    params=["sqlite", pytest.param("falkordb", marks=[pytest.mark.falkordb, pytest.mark.enable_socket])]
)
def db(request, tmp_path):
    """A fresh SQLite file, then the FalkorDB server .ci/run starts (skipped without one)."""
    if request.param == "sqlite":
        yield str(tmp_path / "mem.db")
        return
    url = server_url()
    _wipe(url)
    yield url
    _wipe(url)
