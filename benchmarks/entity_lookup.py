"""Entity lookup: the cost of finding a query's entities as a namespace's names grow.

    python benchmarks/entity_lookup.py [--sizes 1000,10000,100000] [--queries 200] [--seed 0]

Per size N, one ``EntityIndex`` of N random names (a third single or two-word Latin, the rest
Chinese, a few mixed like ``acme公司``), and the same names in a copy of the lookup as it was
before its keys were indexed (``ScanEntityIndex``: every key read twice per query). Queries:
English sentences holding a name or a typo of one, and Chinese ones holding a name. Printed: ms per
query, one thread, for each language and lookup, and the growth from the smallest N to the largest;
both lookups must give the same answer on every query (checked). Also the memory the index adds
over the plain name -> id dict (tracemalloc, the whole structure as built).
"""

from __future__ import annotations

import argparse
import difflib
import random
import string
import time
import tracemalloc
from collections import Counter

from mnemis_integrations.core.indexes.entities import EntityIndex
from mnemis_integrations.core.text import has_cjk, normalise_name, query_terms

CJK_CHARS = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]  # a common-character-sized alphabet


class ScanEntityIndex:
    """The lookup before its keys were indexed: every key read twice per query (the tests' reference too)."""

    def __init__(self):
        self._by_key: dict[str, str] = {}
        self._key_lengths: Counter[int] = Counter()

    @property
    def _max_words(self) -> int:
        return max(self._key_lengths, default=1)

    def add(self, key: str, node_id: str) -> None:
        key = normalise_name(key)
        if not key:
            return
        if key not in self._by_key:
            self._key_lengths[len(key.split())] += 1
        self._by_key[key] = node_id

    def remove_node(self, node_id: str) -> None:
        self._by_key = {k: v for k, v in self._by_key.items() if v != node_id}
        self._key_lengths = Counter(len(k.split()) for k in self._by_key)

    def discard(self, key: str, node_id: str) -> None:
        key = normalise_name(key)
        if self._by_key.get(key) == node_id:
            self.drop([key])

    def drop(self, keys) -> None:
        for key in keys:
            if self._by_key.pop(key, None) is not None:
                n = len(key.split())
                self._key_lengths[n] -= 1
                if not self._key_lengths[n]:
                    del self._key_lengths[n]

    def find_in(self, query: str, fuzzy_min_ratio: float = 0.88) -> dict[str, float]:
        words = query_terms(query)
        found: dict[str, float] = {}
        for n in range(min(self._max_words, len(words)), 0, -1):
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i : i + n])
                nid = self._by_key.get(gram)
                if nid is not None:
                    found[nid] = 1.0
        if has_cjk(query):
            q = normalise_name(query)
            for key, nid in self._by_key.items():
                if has_cjk(key) and key in q:
                    found[nid] = 1.0
        if fuzzy_min_ratio < 1.0:
            singles = [k for k in self._by_key if " " not in k and len(k) >= 4 and not has_cjk(k)]
            for w in words:
                if len(w) < 4 or w in self._by_key:
                    continue
                for k in difflib.get_close_matches(w, singles, n=1, cutoff=fuzzy_min_ratio):
                    nid = self._by_key[k]
                    ratio = round(difflib.SequenceMatcher(None, w, k).ratio(), 3)
                    found[nid] = max(found.get(nid, 0.0), ratio)
        return found


def latin_word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 10)))


def random_name(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.25:
        return latin_word(rng)
    if r < 1 / 3:
        return f"{latin_word(rng)} {latin_word(rng)}"
    if r < 0.35:
        return latin_word(rng) + "".join(rng.choices(CJK_CHARS, k=2))
    return "".join(rng.choices(CJK_CHARS, k=rng.randint(2, 4)))


def typo(rng: random.Random, word: str) -> str:
    i = rng.randrange(len(word))
    return rng.choice([word[:i] + word[i + 1 :], word[:i] + rng.choice(string.ascii_lowercase) + word[i:]])


def queries(rng: random.Random, names: list[str], n: int) -> tuple[list[str], list[str]]:
    latin = [k for k in names if not has_cjk(k)]
    chinese = [k for k in names if has_cjk(k)]
    english, zh = [], []
    for _ in range(n):
        name = rng.choice(latin)
        name = typo(rng, name) if rng.random() < 0.5 and " " not in name else name
        english.append(f"Did the team confirm {name} for the meeting with {latin_word(rng)} tomorrow?")
        zh.append(f"{''.join(rng.choices(CJK_CHARS, k=6))}{rng.choice(chinese)}说了吗{rng.choice(CJK_CHARS)}")
    return english, zh


def ms_per_query(index, qs: list[str]) -> tuple[float, list[dict[str, float]]]:
    t = time.perf_counter()
    answers = [index.find_in(q) for q in qs]
    return (time.perf_counter() - t) * 1000 / len(qs), answers


def index_bytes(names: list[str], cls) -> int:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = cls()
    for i, name in enumerate(names):
        index.add(name, f"e{i}")
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del index
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for n in sizes:
        rng = random.Random(args.seed)
        names = list(dict.fromkeys(normalise_name(random_name(rng)) for _ in range(n)))
        new, old = EntityIndex(), ScanEntityIndex()
        for i, name in enumerate(names):
            new.add(name, f"e{i}")
            old.add(name, f"e{i}")
        english, chinese = queries(rng, names, args.queries)
        row = {"n": len(names)}
        for lang, qs in (("en", english), ("zh", chinese)):
            row[f"{lang}_old"], old_answers = ms_per_query(old, qs)
            row[f"{lang}_new"], new_answers = ms_per_query(new, qs)
            assert [list(a.items()) for a in old_answers] == [list(a.items()) for a in new_answers], lang
        row["mb_old"] = index_bytes(names, ScanEntityIndex) / 2**20
        row["mb_new"] = index_bytes(names, EntityIndex) / 2**20
        rows.append(row)
    header = f"{'keys':>8} {'en old':>9} {'en new':>9} {'zh old':>9} {'zh new':>9}   (ms/query)"
    print(f"{header}  {'MiB old':>8} {'MiB new':>8}")
    for r in rows:
        print(
            f"{r['n']:>8} {r['en_old']:>9.3f} {r['en_new']:>9.3f} {r['zh_old']:>9.3f} {r['zh_new']:>9.3f}"
            f"{'':14}{r['mb_old']:>8.1f} {r['mb_new']:>8.1f}"
        )
    first, last = rows[0], rows[-1]
    print(
        f"growth {last['n']} / {first['n']} keys: "
        + ", ".join(f"{c} x{last[c] / first[c]:.1f}" for c in ("en_old", "en_new", "zh_old", "zh_new"))
    )


if __name__ == "__main__":
    main()
