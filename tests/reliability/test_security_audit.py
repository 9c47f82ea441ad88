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


@pytest.mark.parametrize(
    "url,hidden",
    [
        ("falkordb://alice:4242/xyz@127.0.0.1:6390", "4242"),  # the password's head read as a port
        ("falkordb://alice:99?hidden@127.0.0.1:6390", "hidden"),  # its tail read as an option
        ("falkordb://alice:7777#hidden@127.0.0.1:6390", "7777"),
        ("falkordb://alice:k3y@h1dd3n/x@127.0.0.1:6390", "h1dd3n"),  # past an '@' it holds: a host
    ],
)
def test_a_password_holding_a_slash_a_question_mark_or_a_hash_is_named_in_no_error(monkeypatch, url, hidden):
    """A '/', '?' or '#' in a password ends the address for ``urlparse``: the password's head was
    taken for a port (which the connection error named: "Error -2 connecting to alice:4242") and its
    tail for an option ("unknown FalkorDB address option(s) ['hidden@127.0.0.1:6390']"), although
    ``redacted`` hides everything up to the last '@'."""
    import falkordb
    from redis.exceptions import ConnectionError as RedisConnectionError

    class Unreachable:
        def __init__(self, **kwargs):  # as redis-py words a host it cannot resolve
            raise RedisConnectionError(
                f"Error -2 connecting to {kwargs['host']}:{kwargs['port']}. Name or service not known."
            )

    monkeypatch.setattr(falkordb, "FalkorDB", Unreachable)
    with pytest.raises(StoreError) as caught:
        MnemisMemory(backend=url, embedder=HashingEmbedder())
    assert hidden not in str(caught.value)
    assert "alice:***@127.0.0.1:6390" in str(caught.value)  # the address is still named


def test_a_password_of_any_characters_reaches_the_server_percent_decoded(monkeypatch):
    """Refused raw, a '/', '?', '#' or '@' in a password is written percent-encoded, as in any redis
    URL: the client gets the password itself, and no error names it."""
    import falkordb

    given = {}

    class Server:
        def __init__(self, **kwargs):
            given.update(kwargs)
            raise OSError("no server here")

    monkeypatch.setattr(falkordb, "FalkorDB", Server)
    with pytest.raises(StoreError) as caught:
        MnemisMemory(
            backend="falkordb://al%40ice:s3%2Fc%3Fr%23e%40t%25@127.0.0.1:6390", embedder=HashingEmbedder()
        )
    assert (given["username"], given["password"]) == ("al@ice", "s3/c?r#e@t%")
    assert "s3" not in str(caught.value)


def test_a_chinese_change_cue_repeated_inside_longer_words_reads_the_words_once(monkeypatch):
    """The cue "最终" (in the end) is no cue inside "最终用户" (end users): each such match walked
    every jieba word of the whole text again, so a message repeating it took quadratic time (48,000
    characters: about 14 s; the 1,000,000 a message may hold: hours) in the update judge and in
    search. The words' bounds are now taken once per text, whatever the number of matches."""
    from mnemis_integrations.core import changes
    from mnemis_integrations.core.text import clear_text_caches

    walks = []
    real = changes._word_bounds
    monkeypatch.setattr(changes, "_word_bounds", lambda text: walks.append(text) or real(text))
    clear_text_caches()
    assert not changes.has_change_cue("最终用户" * 200)
    assert len(walks) == 1
    assert changes.has_change_cue("最终用户" * 50 + "。方案最终定了B")  # a cue that is a word still counts


class _SliceCounter(list):
    """A list that counts the copies slicing makes of it."""

    slices = 0

    def __getitem__(self, index):
        if isinstance(index, slice):
            type(self).slices += 1
            return _SliceCounter(super().__getitem__(index))  # a copy counts its own slicing too
        return super().__getitem__(index)


def test_a_capitalised_run_of_filler_words_is_stripped_with_one_copy():
    """A text "A A A ..." is one capitalised run to the name finder; its fillers were stripped one
    word at a time by copying the rest of the list (a copy per word: quadratic in the run; 320,000
    characters took about 12 s of an ingest's offline entity step, 1,000,000 minutes)."""
    from mnemis_integrations.core.builder.entities import _strip_openers, extract_entities

    _SliceCounter.slices = 0
    assert _strip_openers(_SliceCounter(["A"] * 5_000)) == []
    assert _SliceCounter.slices <= 1
    assert _strip_openers(_SliceCounter(["The", "Bank", "of", "Lisbon", "A"])) == ["Bank", "of", "Lisbon"]
    assert [m.name for m in extract_entities(["The Bank of Lisbon A called."])[0]] == ["Bank of Lisbon"]


def test_a_model_reply_stuck_repeating_a_comma_is_cut_back_a_bounded_number_of_times(monkeypatch):
    """A reply cut off while repeating ", " (a model stuck on one token) was cut back one comma at a
    time, scanning and parsing the whole head at each: quadratic in the reply (8,000 characters,
    about 4,000 tokens: about 13 s per try, and the step tries again). Cuts are now bounded: such a
    reply is refused (and asked again), while a reply cut in its last items is still repaired."""
    from mnemis_integrations.core.builder import llm_structured

    scans = []
    real = llm_structured._scan
    monkeypatch.setattr(llm_structured, "_scan", lambda text, start: scans.append(1) or real(text, start))
    with pytest.raises(llm_structured.JSONRepairError):
        llm_structured.extract_json('{"summaries": [' + ", " * 4_000)
    assert len(scans) <= llm_structured._MAX_CUTS + 1
    assert llm_structured.extract_json('{"items": [{"i": 0}, {"i": 1}, , , {"i": 2, "na') == {
        "items": [{"i": 0}, {"i": 1}]
    }
