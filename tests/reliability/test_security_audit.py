"""Hostile input and secrets, against SECURITY.md's promises: bad input gets a MnemisError
subclass (never a bare RecursionError, OverflowError, TypeError or UnicodeEncodeError from deep
inside), and a password in a FalkorDB address is named in no error."""

from __future__ import annotations

import math

import pytest

from mnemis_integrations import (
    ConfigError,
    InvalidQueryError,
    MnemisError,
    MnemisMemory,
    StoreError,
)
from mnemis_integrations.core.embedders import HashingEmbedder

NS = "sec"
SECRET = "s3cretPW"


@pytest.fixture()
def memory():
    mem = MnemisMemory(embedder=HashingEmbedder())
    mem.add_messages(
        [
            {
                "id": "t1",
                "speaker": "ana",
                "text": "Acme's invoice 7 is overdue.",
                "metadata": {"priority": 2},
            },
            {
                "id": "t2",
                "speaker": "li",
                "text": "Acme paid invoice 7 by card.",
                "metadata": {"priority": 1},
            },
        ],
        namespace=NS,
    )
    return mem


def test_a_deeply_nested_filter_is_refused_with_invalid_query_error(memory):
    """A filter nested past any real use is refused when parsed, not a RecursionError from the
    parser (or from matching); a filter nested a few levels still works."""
    shallow: dict = {"priority": 2}
    for _ in range(5):
        shallow = {"$and": [shallow]}
    assert any("t1" in h.source_ids for h in memory.search("Acme invoice", namespace=NS, filter=shallow))
    deep: dict = {"priority": 2}
    for _ in range(5_000):
        deep = {"$or": [deep]}
    with pytest.raises(InvalidQueryError):
        memory.search("Acme invoice", namespace=NS, filter=deep)


def test_a_filter_integer_past_a_float_range_is_refused_with_invalid_query_error(memory):
    """The check that a number is finite turned an int past 1e308 into a float and raised a bare
    OverflowError (and an int of more digits than ``str`` writes, a ValueError in the message);
    an int within a float's range compares as a number."""
    hits = memory.search("Acme invoice", namespace=NS, filter={"priority": {"$lt": 10**300}})
    assert {"t1", "t2"} <= {i for h in hits for i in h.source_ids}
    for huge in (10**400, 10**5000):
        for spec in ({"priority": huge}, {"priority": {"$lt": huge}}, {"priority": {"$in": [1, huge]}}):
            with pytest.raises(InvalidQueryError):
                memory.search("Acme invoice", namespace=NS, filter=spec)


@pytest.mark.parametrize("message_ids", [None, ["sec"], {"sec": 5}, {"sec": [1]}])
def test_score_messages_refuses_malformed_message_ids_with_invalid_query_error(memory, message_ids):
    with pytest.raises(InvalidQueryError):
        memory.score_messages("Acme invoice", message_ids)


def test_score_messages_reads_one_id_given_as_a_string_as_that_id(memory):
    """As forget and exclude_messages do: "t1" is the message t1, not the ids "t" and "1"."""
    assert set(memory.score_messages("Acme invoice", {NS: "t1"})) == {(NS, "t1")}


def test_a_query_with_a_lone_surrogate_is_refused_with_invalid_query_error():
    """Messages holding a lone surrogate are refused with InvalidMessageError; a query holding one
    reached the default embedder, which cannot encode it (UnicodeEncodeError)."""
    mem = MnemisMemory()  # the default embedder: it encodes the query as UTF-8, as any real one does
    mem.add_messages([{"id": "m1", "speaker": "ana", "text": "Acme confirmed plan B."}], namespace=NS)
    for call in (
        lambda: mem.search("Acme \ud800 plan", namespace=NS),
        lambda: mem.score_messages("Acme \ud800 plan", {NS: ["m1"]}),
        lambda: mem.nearest_nodes("Acme \ud800 plan", namespace=NS),
    ):
        with pytest.raises(InvalidQueryError):
            call()


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_query_vector_is_refused_with_invalid_query_error(memory, bad):
    """A vector holding NaN or infinity scores every node NaN: it was answered with no nodes at
    all, as if the memory were empty, instead of being refused."""
    dim = memory.embedder.dim
    assert memory.nearest_nodes(vector=[1.0] * dim, namespace=NS)
    with pytest.raises(InvalidQueryError):
        memory.nearest_nodes(vector=[bad] + [1.0] * (dim - 1), namespace=NS)


@pytest.mark.parametrize(
    "url",
    [
        f"falkordb://alice:{SECRET}@127.0.0.1:6390?bogus=1",
        f"falkordb://alice:{SECRET}@127.0.0.1:6390?timeout=-1",
        f"rediss://alice:{SECRET}@127.0.0.1:6390",
    ],
)
def test_a_bad_falkordb_address_is_refused_without_naming_its_password(url):
    with pytest.raises((StoreError, ConfigError)) as caught:
        MnemisMemory(backend=url, embedder=HashingEmbedder())
    assert SECRET not in str(caught.value)
    assert "alice" in str(caught.value) or "rediss" in str(caught.value)  # the address is still named


def test_falkordb_errors_never_name_the_address_password(monkeypatch):
    """An unreachable server, and any error the server answers with, name the address: without
    its password (errors are logged and shown; the password is a credential)."""
    import falkordb
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import ResponseError

    class Unreachable:
        def __init__(self, **kwargs):
            assert kwargs["password"] == SECRET  # the connection itself still gets it
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    monkeypatch.setattr(falkordb, "FalkorDB", Unreachable)
    url = f"falkordb://alice:{SECRET}@127.0.0.1:6390"
    with pytest.raises(StoreError) as caught:
        MnemisMemory(backend=url, embedder=HashingEmbedder())
    assert SECRET not in str(caught.value)

    class Graph:
        def ro_query(self, query, params=None):
            raise ResponseError("query refused")

        query = ro_query

    class Server:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def select_graph(self, name):
            return Graph()

        def list_graphs(self):
            return ["mnemis__meta"]

    monkeypatch.setattr(falkordb, "FalkorDB", Server)
    with pytest.raises(MnemisError) as caught:
        MnemisMemory(backend=url, embedder=HashingEmbedder())
    assert "query refused" in str(caught.value)
    assert SECRET not in str(caught.value)
