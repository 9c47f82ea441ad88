"""EntityIndex lookup reads only the keys a query can match, and answers as the full scan did."""

from __future__ import annotations

import difflib
import random

import pytest
from bench_modules import bench_module

from mnemis_integrations.core.indexes import entities
from mnemis_integrations.core.indexes.entities import EntityIndex, _gram_tokens, _min_shared_grams
from mnemis_integrations.core.text import has_cjk

ScanEntityIndex = bench_module("entity_lookup").ScanEntityIndex  # the lookup as it was: the reference


LATIN = "abcdeilmnorst"  # few letters: many near-misses, repeated bigrams and trigrams
HANZI = "张伟李娜公司报价会议周一项目王芳北京上海"
CUTOFFS = (0.88, 0.7, 0.4, 1.0)


def _latin(rng: random.Random) -> str:
    return "".join(rng.choice(LATIN) for _ in range(rng.randint(2, 11)))


def _hanzi(rng: random.Random, most: int = 4) -> str:
    return "".join(rng.choice(HANZI) for _ in range(rng.randint(1, most)))


def _name(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        name = _latin(rng)
    elif r < 0.6:
        name = f"{_latin(rng)} {_latin(rng)}"
    elif r < 0.85:
        name = _hanzi(rng)
    else:
        name = rng.choice(
            [_latin(rng) + _hanzi(rng, 2), _hanzi(rng, 2) + _latin(rng), f"{_latin(rng)} {_hanzi(rng)}"]
        )
    return rng.choice([name, name.upper(), f"  {name}'s ", name.title()])


def _typo(rng: random.Random, word: str) -> str:
    if len(word) < 2:
        return word + rng.choice(LATIN)
    i = rng.randrange(len(word) - 1)
    c = rng.choice(LATIN)
    return rng.choice(
        [
            word[:i] + word[i + 1 :],
            word[:i] + c + word[i:],
            word[:i] + c + word[i + 1 :],
            word[:i] + word[i + 1] + word[i] + word[i + 2 :],
            word + "s",
            word + word[-2:],
        ]
    )


def _query(rng: random.Random, keys: list[str]) -> str:
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        key = rng.choice(keys) if keys else _latin(rng)
        if r < 0.3:
            parts.append(key)
        elif r < 0.6:
            parts.append(" ".join(_typo(rng, w) for w in key.split()))
        elif r < 0.75:
            parts.append(_latin(rng))
        elif r < 0.9:
            parts.append(_hanzi(rng, 3) + key + _hanzi(rng, 2))  # Chinese runs no space apart
        else:
            parts.append(_hanzi(rng, 6))
    return rng.choice([" ", "，", "", " and "]).join(parts) + rng.choice(["?", "", "吗"])


def _same_state(new: EntityIndex, old: ScanEntityIndex) -> None:
    assert list(new._by_key.items()) == list(old._by_key.items())
    assert new._max_words == old._max_words


@pytest.mark.parametrize("seed", range(3))
def test_lookup_answers_as_the_full_scan_through_random_edits(seed):
    rng = random.Random(seed)
    new, old = EntityIndex(), ScanEntityIndex()
    node_ids = [f"e{i}" for i in range(60)]
    for step in range(2000):
        keys = list(old._by_key)
        r = rng.random()
        if r < 0.55:
            name, nid = _name(rng), rng.choice(node_ids)
            new.add(name, nid)
            old.add(name, nid)
        elif r < 0.63:
            dropped = rng.sample(keys, min(len(keys), rng.randint(0, 3))) + [_latin(rng)]
            new.drop(dropped)
            old.drop(dropped)
        elif r < 0.7 and keys:
            key = rng.choice(keys)
            nid = rng.choice([old._by_key[key], rng.choice(node_ids)])
            new.discard(key.upper(), nid)
            old.discard(key.upper(), nid)
        elif r < 0.77:
            nid = rng.choice(node_ids)
            new.remove_node(nid)
            old.remove_node(nid)
        else:
            query = _query(rng, keys)
            for cutoff in CUTOFFS if step % 10 else (*CUTOFFS, 0.0):  # 0: every key a candidate
                # the order too: downstream reads the found entities in it
                assert list(new.find_in(query, cutoff).items()) == list(old.find_in(query, cutoff).items()), (
                    query,
                    cutoff,
                )
            continue
        _same_state(new, old)


def test_every_derived_structure_empties_with_the_names():
    rng = random.Random(7)
    idx = EntityIndex()
    for i in range(500):
        idx.add(_name(rng), f"e{i % 40}")
    for i in range(0, 40, 2):
        idx.remove_node(f"e{i}")
    idx.drop(list(idx.names())[::3])
    for key in list(idx.names())[::2]:
        idx.discard(key, idx.get(key))
    for i in range(1, 40, 2):
        idx.remove_node(f"e{i}")
    assert len(idx) == 0
    assert not (idx._key_lengths or idx._keys_of or idx._cjk_rank or idx._cjk_lengths)
    assert not (idx._singles or idx._gram_keys)


def test_min_shared_grams_is_a_true_bound():
    """No pair of words whose ratio reaches the cutoff shares fewer n-gram tokens than the bound."""
    rng = random.Random(11)
    for _ in range(20000):
        a = "".join(rng.choice("abcde") for _ in range(rng.randint(4, 14)))
        b = _typo(rng, _typo(rng, a)) if rng.random() < 0.7 else "".join(rng.choice("abcde") for _ in a)
        ratio = difflib.SequenceMatcher(None, b, a).ratio()
        for cutoff in (0.95, 0.88, 0.8, 0.7, 0.5):
            for size in (2, 3):
                need = _min_shared_grams(len(b), len(a), size, cutoff)
                if ratio >= cutoff:
                    shared = len(set(_gram_tokens(a, size)) & set(_gram_tokens(b, size)))
                    assert need is not None and shared >= need, (a, b, cutoff, size)


class _CountingDict(dict):
    def __init__(self, *args):
        super().__init__(*args)
        self.reads = 0

    def __contains__(self, key):
        self.reads += 1
        return super().__contains__(key)


def _keys_read(idx: EntityIndex, queries: list[str], monkeypatch) -> tuple[int, int]:
    """(fuzzy candidates difflib compares, Chinese key probes) over ``queries``."""
    compared = 0
    close_matches = difflib.get_close_matches

    def counting(word, possibilities, *args, **kwargs):
        nonlocal compared
        possibilities = list(possibilities)
        compared += len(possibilities)
        return close_matches(word, possibilities, *args, **kwargs)

    monkeypatch.setattr(entities.difflib, "get_close_matches", counting)
    idx._cjk_rank = probed = _CountingDict(idx._cjk_rank)
    for q in queries:
        idx.find_in(q)
    monkeypatch.undo()
    return compared, probed.reads


def test_a_lookup_reads_a_sliver_of_the_keys_at_100k(monkeypatch):
    def index(n: int) -> EntityIndex:
        rng = random.Random(3)
        idx = EntityIndex()
        while len(idx) < n:
            r = rng.random()
            if r < 1 / 3:
                name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10)))
            else:
                name = "".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(rng.randint(2, 4)))
            idx.add(name, f"e{len(idx)}")
        return idx

    reads = {}
    for n in (1_000, 100_000):
        idx = index(n)
        rng = random.Random(5)
        latin = [k for k in list(idx.names())[:1000] if not has_cjk(k)]
        chinese = [k for k in list(idx.names())[:1000] if has_cjk(k)]
        queries = [f"did {_typo(rng, rng.choice(latin))} confirm the meeting tomorrow" for _ in range(50)]
        queries += [f"昨天{rng.choice(chinese)}在会上说了吗" for _ in range(50)]
        reads[n] = _keys_read(idx, queries, monkeypatch)
    compared, probed = reads[100_000]
    singles = sum(1 for k in idx.names() if not has_cjk(k))
    # The full scan compared every single-word key per query word and read every key per Chinese query.
    assert compared < 0.005 * singles * 50 * 4
    # A Chinese query probes each of its places once per length of the names starting there.
    assert probed <= 50 * len("昨天xxxx在会上说了吗") * 3
