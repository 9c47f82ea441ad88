"""Differential checks found by a random driver: the memory that made a change answers as a memory
reopened on the same store does (the answers are a function of the stored state, not of the way it
was written)."""

from __future__ import annotations

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core import recipes
from mnemis_integrations.core.embedders import HashingEmbedder

PLACE_AGAIN = recipes.DEFAULT.with_(build={"place_again_until_words": 10_000})


def _said(*rows: tuple[str, str, str]) -> list[dict]:
    return [{"id": i, "speaker": "bob", "text": t, "timestamp": ts} for i, t, ts in rows]


def test_a_fragment_placed_again_leaves_its_old_concept_as_a_reopened_store_derives_it(tmp_path):
    """m8 (a refund line) is placed beside the refund fragment; grown by m9 (server costs) it is
    placed again under the server subtopic. Its old subtopic's vector loses it, and so must the
    concept above (the mean of its subtopics' vectors): a concept mean taken from the subtopic's
    stale vector made the writer score the concept otherwise than a reopened store does."""
    path = tmp_path / "m.db"

    def opened() -> MnemisMemory:
        return MnemisMemory(path=path, embedder=HashingEmbedder(), config=PLACE_AGAIN)

    mem = opened()
    mem.add_messages(
        _said(
            ("m0", "订单7的退款被银行退回了。 (#0)", "2025-03-04T09:00:00Z"),
            ("m1", "客户A要求改成商业版套餐。", "2025-03-04T09:01:00Z"),
            ("m2", "服务器费用这个月又超预算了。 (#2)", "2025-03-04T10:01:00Z"),
        ),
        namespace="zh",
    )
    mem.add_messages(_said(("m8", "订单7的退款被银行退回了。", "2025-03-13T11:01:00Z")), namespace="zh")
    assert mem.graph("zh").parent("f:m8").id == "s:m0"
    grown = _said(("m9", "服务器费用这个月又超预算了。 (#9)", "2025-03-13T11:02:00Z"))
    mem.add_messages(grown, namespace="zh")
    assert mem.graph("zh").parent("f:m8").id == "s:m2"  # placed again: s:m0 now holds f:m0 alone
    reopened = opened()
    try:
        assert reopened.graph("zh").to_data() == mem.graph("zh").to_data()
        live = [(h.node_id, round(h.score, 6)) for h in mem.search("退款", k=8, namespace="zh")]
        again = [(h.node_id, round(h.score, 6)) for h in reopened.search("退款", k=8, namespace="zh")]
        assert live == again
    finally:
        reopened.close()
        mem.close()
