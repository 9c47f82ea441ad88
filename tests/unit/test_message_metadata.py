"""Issue #14: messages carry metadata (a flat dict of str / int / float / bool), stored with the
message on every backend, returned on hits, and erased with the message by ``forget``."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import numpy as np
import pytest
from _memories import backend  # noqa: F401  (fixture)
from _over_time import msg
from fakes import sqlite_file_bytes

from mnemis_integrations import DuplicateMessageError, InvalidMessageError, MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.tokens import count_tokens

EMAIL = {"channel": "email", "priority": 2, "score": 0.5, "vip": True, "day": "2025-03-03"}
CHAT = {"channel": "chat", "priority": 1}


def _tagged(i, text, metadata, **kw):
    return msg(i, text, **kw) | {"metadata": metadata}


CONVERSATION = [
    _tagged(1, "The refund for order 42 timed out at the bank callback.", EMAIL),
    _tagged(2, "Refund timeouts again: the bank callback never arrived.", CHAT, speaker="bob", minutes=1),
    msg(3, "Lunch at the noodle place on Friday works.", days=4),
]


@pytest.mark.parametrize(
    "metadata, reason",
    [
        (["channel", "email"], "must be a dict"),
        ({"tags": ["a", "b"]}, "nested values are not supported"),
        ({"owner": {"name": "ann"}}, "nested values are not supported"),
        ({"when": datetime(2025, 3, 1, tzinfo=timezone.utc)}, "ISO-8601 string"),
        ({"gone": None}, "leave the key out"),
        ({"blob": b"x"}, "bytes is not supported"),
        ({"ratio": float("nan")}, "finite number"),
        ({"big": 2**70}, "64-bit"),
        ({"": "x"}, "non-empty strings"),
        ({1: "x"}, "non-empty strings"),
        ({"$in": "x"}, "no leading '$'"),
        ({"a\nb": "x"}, "control character"),
        ({"k" * 129: "x"}, "at most 128 characters"),
        ({"note": "x" * 4097}, "longer than 4096"),
        ({f"k{i}": i for i in range(65)}, "the limit is 64"),
    ],
)
def test_metadata_that_is_not_a_flat_dict_of_scalars_is_refused_and_nothing_is_written(
    memory, metadata, reason
):
    memory.add_messages(CONVERSATION[:1], namespace="u1")
    batch = [msg(5, "A fine message."), _tagged(6, "A message with bad metadata.", metadata)]
    with pytest.raises(InvalidMessageError, match="metadata") as err:
        memory.add_messages(batch, namespace="u1")
    assert reason in str(err.value) and err.value.message_id == "m6" and err.value.index == 1
    assert [m.id for m in memory.messages("u1")] == ["m1"]  # the batch's good message was not written either


def test_numpy_numbers_are_stored_as_plain_numbers(memory):
    memory.add_messages(
        [_tagged(1, "Refund timed out.", {"n": np.int64(3), "x": np.float32(0.5)})], namespace="u1"
    )
    md = memory.messages("u1")[0].metadata
    assert md == {"n": 3, "x": 0.5} and type(md["n"]) is int and type(md["x"]) is float


def test_metadata_is_stored_on_every_backend_and_survives_reopening(backend):  # noqa: F811
    backend.open().add_messages(CONVERSATION, namespace="u1")
    mem = backend.open()
    stored = {m.id: m.metadata for m in mem.messages("u1")}
    assert stored == {"m1": EMAIL, "m2": CHAT, "m3": {}}
    # types come back as they went in (True is not 1, 2 is not 2.0)
    assert [type(stored["m1"][k]) for k in EMAIL] == [str, int, float, bool, str]


def test_the_stored_metadata_is_not_shared_with_the_caller(memory):
    given = dict(EMAIL)
    memory.add_messages([_tagged(1, "Refund timed out.", given)], namespace="u1")
    given["channel"] = "changed after the call"
    memory.messages("u1")[0].metadata["channel"] = "changed through a read"
    assert memory.messages("u1")[0].metadata["channel"] == "email"


def test_a_redelivery_with_other_metadata_is_a_conflict_and_the_same_metadata_is_skipped(backend):  # noqa: F811
    mem = backend.open()
    mem.add_messages(CONVERSATION, namespace="u1")
    assert mem.add_messages(CONVERSATION[:1], namespace="u1").skipped == 1
    for other in ({**EMAIL, "priority": 3}, {**EMAIL, "vip": 1}, {}):
        with pytest.raises(DuplicateMessageError, match="metadata"):
            mem.add_messages([CONVERSATION[0] | {"metadata": other}], namespace="u1")
    assert mem.messages("u1")[0].metadata == EMAIL


def test_hits_return_the_metadata_of_the_messages_they_show(backend):  # noqa: F811
    mem = backend.open()
    mem.add_messages(CONVERSATION, namespace="u1")
    hit = next(
        h for h in mem.search("refund bank callback timeout", k=5, namespace="u1") if h.kind == "fragment"
    )
    assert hit.source_ids == ("m1", "m2")
    assert hit.message_metadata == {"m1": EMAIL, "m2": CHAT}
    assert hit.metadata == {}  # m1 and m2 share no key with one value
    one_message = mem.config.with_(context={"breadth_messages": 1})
    narrowed = mem.fit_to_budget([hit], count_tokens(hit.text) - 1, config=one_message)[0]
    assert len(narrowed.source_ids) == 1
    (only,) = narrowed.source_ids
    assert narrowed.metadata == {"m1": EMAIL, "m2": CHAT}[only] and set(narrowed.message_metadata) == {only}
    d = hit.to_dict()
    assert d["message_metadata"] == {"m1": EMAIL, "m2": CHAT} and d["metadata"] == {}


def test_forget_erases_a_message_with_its_metadata(backend):  # noqa: F811
    mem = backend.open()
    mem.add_messages(
        CONVERSATION
        + [_tagged(4, "My passport number is X1234.", {"doc": "passport-X1234"}, days=4, minutes=1)],
        namespace="u1",
    )
    mem.forget(["m4"], namespace="u1")
    after = backend.open()
    assert "m4" not in {m.id for m in after.messages("u1")}
    assert not after.search("passport number", k=10, namespace="u1", filter={"doc": "passport-X1234"})
    assert all("m4" not in h.message_metadata for h in after.search("passport", k=10, namespace="u1"))


def test_forget_leaves_no_copy_of_the_metadata_in_the_sqlite_file(tmp_path):
    path = tmp_path / "m.db"
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    mem.add_messages(CONVERSATION + [_tagged(4, "Noted.", {"doc": "passport-X1234"}, days=5)], namespace="u1")
    assert b"passport-X1234" in sqlite_file_bytes(path)
    mem.forget(["m4"], namespace="u1")
    mem.close()
    assert b"passport-X1234" not in sqlite_file_bytes(path)


def test_a_file_written_before_metadata_existed_opens_and_takes_metadata(tmp_path):
    """A format-2 file of the previous release has no ``metadata`` column: opening it adds one,
    its messages read back with no metadata, and new messages keep theirs."""
    path = tmp_path / "old.db"
    MnemisMemory(path, embedder=HashingEmbedder()).add_messages([msg(1, "Refund timed out.")], namespace="u1")
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE messages DROP COLUMN metadata")  # what the previous release wrote
    con.commit()
    con.close()
    mem = MnemisMemory(path, embedder=HashingEmbedder())
    assert mem.messages("u1")[0].metadata == {}
    mem.add_messages([_tagged(2, "Refund retried.", CHAT, minutes=1)], namespace="u1")
    reopened = MnemisMemory(path, embedder=HashingEmbedder())
    assert [m.metadata for m in reopened.messages("u1")] == [{}, CHAT]
