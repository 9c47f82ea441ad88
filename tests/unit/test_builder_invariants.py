"""The offline builder's invariants under the ingestion orders a real app produces: a store reopened
between two adds builds what one left open builds."""

from __future__ import annotations

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.config import BuildConfig, MemoryConfig
from mnemis_integrations.core.embedders import HashingEmbedder

# One at a time, the third arriving late: m12 grows f:m13, which is placed again into the subtopic
# it shares with f:m00, and m06 then joins them.
_STREAM = [
    ("m13", "ana", "Acme wants annual billing for the plan.", "2025-03-01T09:13:00+00:00"),
    ("m10", "ana", "The fence paint is drying.", "2025-03-01T09:30:00+00:00"),
    ("m00", "li", "Acme asked to move to the Business plan.", "2025-03-01T09:00:00+00:00"),
    ("m12", "ana", "The fence paint is drying.", "2025-03-01T09:36:00+00:00"),
    ("m06", "ana", "Acme confirmed the Business plan quote.", "2025-03-01T21:00:00+00:00"),
]


def _hierarchy(mem: MnemisMemory) -> dict[str, tuple]:
    return {n.id: (n.label, n.summary, tuple(n.keywords)) for n in mem.graph("u").nodes()}


def test_a_reopened_store_builds_the_same_hierarchy_as_one_left_open(tmp_path):
    cfg = MemoryConfig(build=BuildConfig(place_again_until_words=10_000))
    path = tmp_path / "mem.db"
    kept = MnemisMemory(embedder=HashingEmbedder(), config=cfg)
    for mid, speaker, text, when in _STREAM:
        msg = {"id": mid, "speaker": speaker, "text": text, "timestamp": when}
        kept.add_messages([msg], namespace="u")
        with MnemisMemory(embedder=HashingEmbedder(), config=cfg, path=path) as reopened:
            reopened.add_messages([msg], namespace="u")
            assert _hierarchy(reopened) == _hierarchy(kept), f"after {mid}"


def _fragments(mem: MnemisMemory) -> set[tuple[str, ...]]:
    return {tuple(f.source_ids) for f in mem.graph("u").nodes() if f.kind.value == "fragment"}


def test_a_message_said_at_the_same_time_continues_the_fragment_that_ends_the_stream():
    # b1..b6 fill a fragment (max_segment_messages 6); a7 is said at the same minute as b6, so it
    # starts the next one, and a8 continues it: streamed, the full fragment f:b1 must not be taken
    # for the latest because its id sorts after f:a7.
    said = ["09:00", "09:01", "09:02", "09:03", "09:04", "09:05", "09:05", "09:06"]
    ids = ["b1", "b2", "b3", "b4", "b5", "b6", "a7", "a8"]
    msgs = [
        {
            "id": i,
            "speaker": "ana",
            "text": "The garden shed roof needs new tiles.",
            "timestamp": f"2025-03-01T{t}:00Z",
        }
        for i, t in zip(ids, said, strict=True)
    ]
    batch = MnemisMemory(embedder=HashingEmbedder())
    batch.add_messages(msgs, namespace="u")
    stream = MnemisMemory(embedder=HashingEmbedder())
    for m in msgs:
        stream.add_messages([m], namespace="u")
    assert _fragments(batch) == {("b1", "b2", "b3", "b4", "b5", "b6"), ("a7", "a8")}
    assert _fragments(stream) == _fragments(batch)
