"""The FalkorDB server of the FalkorDB-backed tests: ``MNEMIS_FALKORDB_URL`` (``.ci/run`` starts one).

Every test that uses it asks :func:`server_url` first. The address gets a reply timeout, so a
server that stops answering fails a test instead of holding the whole run, and the server is
asked a trivial query first: once it has failed to answer, every later test fails at once
with the reason, instead of each waiting out its own timeout.
"""

from __future__ import annotations

import os

import pytest

_REPLY_TIMEOUT_S = 60
_PROBE_TIMEOUT_S = 5
_dead: list[str] = []  # why the server stopped answering, once it has


def with_reply_timeout(url: str) -> str:
    """``url`` with a reply timeout, unless it already sets one."""
    if "timeout=" in url:
        return url
    return f"{url}{'&' if '?' in url else '?'}timeout={_REPLY_TIMEOUT_S}"


def server_url() -> str:
    """The test server's address; skips without one, fails when it does not answer."""
    url = os.environ.get("MNEMIS_FALKORDB_URL")
    if not url:
        pytest.skip("no FalkorDB server (MNEMIS_FALKORDB_URL); .ci/run starts one")
    probe(url)
    return with_reply_timeout(url)


def probe(url: str) -> None:
    """Fail the calling test unless the server at ``url`` answers a query within seconds."""
    if _dead:
        pytest.fail(_dead[0])
    from falkordb import FalkorDB

    from mnemis_integrations.core.storage.falkordb import parse_url

    quick = {"socket_timeout": _PROBE_TIMEOUT_S, "socket_connect_timeout": _PROBE_TIMEOUT_S}
    options = parse_url(url) | quick
    try:
        db = FalkorDB(**options)
        db.select_graph("tests_probe").query("RETURN 1")  # a graph query runs on the module's threads
        db.connection.close()
    except Exception as e:  # redis.TimeoutError, ConnectionError, ...
        _dead.append(f"the FalkorDB server at {url} did not answer a trivial query: {type(e).__name__}: {e}")
        pytest.fail(_dead[0])
