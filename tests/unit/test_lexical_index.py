"""The incremental BM25 index gives bm25s's scores (the reference), also after removals."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from mnemis_integrations.core.indexes.lexical import LexicalIndex
from mnemis_integrations.core.text import lexical_terms

WORDS = [
    "refund",
    "bank",
    "callback",
    "timeout",
    "lunch",
    "noodles",
    "Acme",
    "pricing",
    "plan",
    "quote",
    "confirmed",
    "server",
    "budget",
    "退款",
    "银行",
    "回调",
    "价格",
    "方案",
    "the",
    "a",
    "of",
]


def _reference(keys, texts, query):
    model = bm25s.BM25()
    model.index([lexical_terms(t) or ["\x00"] for t in texts], show_progress=False)
    q = lexical_terms(query)
    known = [t for t in q if t in model.vocab_dict]
    if not known:
        return {}
    s = model.get_scores(known)
    return {keys[i]: float(s[i]) for i in np.nonzero(s > 0)[0]}


@pytest.mark.parametrize("seed", range(5))
def test_scores_equal_bm25s_after_adds_and_removals(seed):
    rng = random.Random(seed)
    texts = {
        f"m{i}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) or "?" for i in range(60)
    }
    idx = LexicalIndex()
    keys = list(texts)
    for start in range(0, 60, 7):  # several small batches, as an agent adds turns
        idx.add(keys[start : start + 7], [texts[k] for k in keys[start : start + 7]])
    gone = rng.sample(keys, 15)
    idx.remove(gone)
    kept = [k for k in keys if k not in gone]
    for _ in range(10):
        query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        got = idx.scores(query)
        want = _reference(kept, [texts[k] for k in kept], query)
        assert set(got) == set(want)
        for k in want:
            assert got[k] == pytest.approx(want[k], rel=1e-4)


def test_re_adding_a_key_replaces_its_text():
    idx = LexicalIndex()
    idx.add(["a", "b"], ["refund bank", "lunch noodles"])
    idx.add(["a"], ["pricing plan"])
    assert len(idx) == 2 and "a" not in idx.scores("refund") and "a" in idx.scores("pricing")


def test_hidden_keys_count_as_never_stored():
    """The update judge asks as of a message whose fragment's later messages are indexed already:
    with them hidden, idf, weights and overlaps are those of the index before they arrived."""
    rng = random.Random(5)
    texts = {f"m{i}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) for i in range(40)}
    keys = list(texts)
    later = keys[30:]
    full, before = LexicalIndex(), LexicalIndex()
    full.add(keys, [texts[k] for k in keys])
    before.add(keys[:30], [texts[k] for k in keys[:30]])
    for _ in range(10):
        query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        got = full.overlapping(query, 8, max_df=6, hidden=later)
        want = before.overlapping(query, 8, max_df=6)
        assert [k for k, _ in got] == [k for k, _ in want]
        assert [v for _, v in got] == pytest.approx([v for _, v in want])
    as_of, now = full.weights(keys[:30], hidden=later), full.weights(keys[:30])
    then = before.weights(keys[:30])
    for k in keys[:30]:
        assert as_of[k] == pytest.approx(then[k])
        assert now[k] != pytest.approx(then[k])
    terms = sorted({t for k in keys for t in full.terms(k)})
    assert full.idfs(terms, hidden=later) == pytest.approx({t: before.idf(t) for t in terms})
    assert full.idfs(terms) == pytest.approx({t: full.idf(t) for t in terms})
