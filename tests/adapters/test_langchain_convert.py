"""The pure conversions behind the LangChain adapters, tested without any framework import."""

from __future__ import annotations

import doctest
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemis_integrations.core.retrieval.results import MemoryHit
from mnemis_integrations.langchain import _convert as cv


def make_hit(
    node_id="n1",
    *,
    text="refund is late",
    path=("Shopping", "Refunds"),
    score=0.9,
    sources=("m1",),
    status="active",
):
    return MemoryHit(
        node_id=node_id,
        kind="fragment",
        text=text,
        source_ids=tuple(sources),
        score=score,
        semantic_score=0.8,
        relation_score=0.5,
        via=("semantic", "relation"),
        path=tuple(path),
        time=datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc),
        status=status,
        label="Late refund",
        namespace="u1",
    )


def test_module_docstring_examples_hold():
    failures, _ = doctest.testmod(cv, optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_convert_module_loads_no_framework_module():
    code = (
        "import sys, mnemis_integrations.langchain._convert; "
        "print(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('langchain_core', 'langgraph', 'langchain')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_document_metadata_carries_path_scores_and_provenance_as_json_values():
    md = make_hit().to_metadata()
    assert md["path"] == ["Shopping", "Refunds"]
    assert md["path_str"] == "Shopping > Refunds"
    assert (md["score"], md["semantic_score"], md["relation_score"]) == (0.9, 0.8, 0.5)
    assert md["via"] == ["semantic", "relation"]
    assert md["kind"] == "fragment" and md["node_id"] == "n1" and md["status"] == "active"
    assert md["source_ids"] == ["m1"]
    assert md["time"] == "2024-05-01T12:00:00+00:00"
    assert "text" not in md


def test_format_hits_puts_each_path_before_its_text_in_rank_order():
    text = cv.format_hits(
        [make_hit(), make_hit("n2", text="lunch at noon", path=("Daily", "Food"))], header="H"
    )
    assert text.splitlines() == [
        "H",
        "- [Shopping > Refunds] refund is late",
        "- [Daily > Food] lunch at noon",
    ]


def test_format_hits_marks_superseded_memories_and_returns_empty_for_no_hits():
    assert "(superseded)" in cv.format_hits([make_hit(status="superseded")])
    assert cv.format_hits([], empty="none") == "none"


@given(
    st.text(min_size=0, max_size=20),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5)),
)
def test_store_message_id_round_trips_key_and_value_digest(key, value):
    mid = cv.store_message_id(key, value, "t")
    metadata = cv.store_message_metadata(key, mid)
    assert cv.parse_store_message_id(mid, metadata) == (key, cv.value_digest(value))


def test_value_digest_ignores_key_order():
    assert cv.value_digest({"a": 1, "b": 2}) == cv.value_digest({"b": 2, "a": 1})


def test_value_to_text_keeps_text_fields_bare_and_labels_other_values():
    assert cv.value_to_text({"content": "likes tea"}) == "likes tea"
    assert cv.value_to_text({"food": "pizza", "tags": ["a", "b"], "n": 2}) == "pizza\na, b\nn: 2"
    assert cv.value_to_text({"meta": {"lang": "en"}}) == 'meta: {"lang":"en"}'
    assert cv.value_to_text({"a": "x", "b": "y", "c": None}, fields=["c", "b", "a"]) == "y\nx"


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"kind": "pref"}, True),
        ({"kind": "fact"}, False),
        ({"n": {"$gte": 3, "$lt": 4}}, True),
        ({"n": {"$gt": 3}}, False),
        ({"n": {"$ne": 2}}, True),
        ({"meta": {"lang": "en"}}, True),
        ({"meta": {"lang": "fr"}}, False),
        ({"tags": ["a", "b"]}, True),
        ({"missing": {"$gt": 1}}, False),
        (None, True),
    ],
)
def test_filter_follows_langgraph_store_rules(flt, expected):
    value = {"kind": "pref", "n": 3, "meta": {"lang": "en"}, "tags": ["a", "b"]}
    assert cv.matches_filter(value, flt) is expected


def test_filter_with_unknown_operator_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"\$gte"):
        cv.matches_filter({"n": 1}, {"n": {"$near": 1}})


def test_keys_in_recall_order_keeps_best_hit_per_item_and_skips_foreign_ids():
    a = cv.store_message_id("a", {"t": 1}, "t: 1")
    b = cv.store_message_id("b", {"t": 2}, "t: 2")
    hits = [make_hit("n1", sources=(a, "chat-7")), make_hit("n2", sources=(b, a), score=0.5)]
    out = cv.keys_in_recall_order(hits)
    assert [(key, mid, hit.node_id) for key, _, mid, hit in out] == [("a", a, "n1"), ("b", b, "n2")]


def test_message_record_maps_langchain_roles_to_speakers():
    rec = cv.message_record(message_id="m1", role="human", text="hi")
    assert rec == {"id": "m1", "speaker": "user", "text": "hi", "timestamp": None}
    assert cv.speaker_for_role("ai") == "assistant"
    assert cv.role_for_speaker("assistant") == "ai" and cv.role_for_speaker("Bob") == "human"


def test_last_turn_starts_at_latest_user_message():
    assert cv.last_turn(["human", "ai", "human", "ai", "tool", "ai"]) == 2
    assert cv.last_turn([]) == 0
