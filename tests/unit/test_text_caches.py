"""The caches of functions of a message's text (``core.text.text_cache``) hold a bounded number of
characters, not only of entries: a message may hold a million characters (LlamaIndex documents are
stored as messages), and 4,096 of them kept as keys held gigabytes. What a cache answers is what the
function computes."""

from __future__ import annotations

import threading
import tracemalloc

from mnemis_integrations.core.changes import has_change_cue, stated_values
from mnemis_integrations.core.filters import _as_time
from mnemis_integrations.core.retrieval.excerpt import _analysed
from mnemis_integrations.core.text import (
    _TEXT_CACHES,
    TEXT_CACHE_CHARS,
    TextCache,
    _never_a_noun,
    _stem,
    clear_text_caches,
    jieba_words,
)
from mnemis_integrations.core.tokens import count_tokens


def _long_message(n: int, chars: int) -> str:
    """A pasted report of ``chars`` characters, told apart by ``n``, stating values and a change."""
    line = f"Report {n}: the review is pushed to Thursday 3pm, the budget is ${n * 100 + 7}. "
    return (line * (chars // len(line) + 1))[:chars]


def test_long_messages_do_not_all_stay_in_the_process_as_keys_of_the_change_caches():
    has_change_cue("warm up the patterns")
    stated_values("warm up the patterns: 3pm")
    clear_text_caches()
    tracemalloc.start()
    try:
        for n in range(5):  # each over a third of what a cache holds: two at most stay
            text = _long_message(n, TEXT_CACHE_CHARS * 2 // 5)
            assert has_change_cue(text) == has_change_cue.__wrapped__(text)
            assert stated_values(text) == stated_values.__wrapped__(text)
            del text
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # ASCII text takes a byte a character: five reports held two million bytes, two hold 800,000
    assert held < 1.2 * TEXT_CACHE_CHARS, held
    assert has_change_cue.cache_info().currsize == stated_values.cache_info().currsize == 2


def test_a_message_longer_than_a_cache_holds_is_computed_and_not_kept():
    clear_text_caches()
    has_change_cue("A short one stays.")
    text = _long_message(1, TEXT_CACHE_CHARS + 1)
    assert has_change_cue(text) == has_change_cue.__wrapped__(text) is True
    assert stated_values(text) == stated_values.__wrapped__(text)
    assert stated_values.cache_info().currsize == 0
    info = has_change_cue.cache_info()
    assert (info.currsize, info.chars) == (1, len("A short one stays."))


def _calls() -> list[tuple[TextCache, tuple]]:
    """A call of each text cache, on short texts and on long ones (a document, a Chinese one)."""
    short, long_en = "Plan B moved to Friday, 4pm: $350 now.", _long_message(7, 200_000)
    short_zh, long_zh = "那不铺实木了，改成SPC石塑地板", "周会改到周四下午三点，预算五万。" * 2_000
    out: list[tuple[TextCache, tuple]] = []
    for text in (short, long_en, short_zh, long_zh):
        out += [(has_change_cue, (text,)), (stated_values, (text,)), (_analysed, (text, 64, count_tokens))]
    out += [(jieba_words, (short_zh,)), (jieba_words, (long_zh[:20_000], False))]
    out += [(_as_time, (v,)) for v in ("2025-06-04T15:30:00+02:00", "next week", "2025-06-04" * 5_000)]
    out += [(f, (w,)) for f in (_stem, _never_a_noun) for w in ("researching", "believe", "x" * 100_000)]
    return out


def test_what_a_text_cache_answers_is_what_its_function_computes_for_short_and_long_texts():
    clear_text_caches()
    for cache, args in _calls():
        expected = cache.__wrapped__(*args)
        assert cache(*args) == expected, (cache.__name__, args[0][:40])  # computed and kept
        assert cache(*args) == expected, (cache.__name__, args[0][:40])  # kept
    assert jieba_words(short := "周会改到周四", hmm=False) == jieba_words.__wrapped__(short, hmm=False)


def test_clearing_the_text_caches_empties_every_one():
    for cache, args in _calls():
        cache(*args)
    assert all(cache.cache_info().currsize for cache in {c for c, _ in _calls()})
    clear_text_caches()
    assert all(cache.cache_info().currsize == cache.cache_info().chars == 0 for cache in _TEXT_CACHES)


def test_a_value_computed_while_the_cache_was_cleared_is_not_kept():
    """A forget clears the caches so that erased text does not stay in the process; a search that
    began reading that text before the clear must not put it back when it finishes."""
    cache: TextCache[str]

    def erased_meanwhile(text: str) -> str:
        cache.cache_clear()  # a forget in another thread, while this call computes
        return text.upper()

    cache = TextCache(erased_meanwhile, maxsize=8, max_chars=100)
    assert cache("the erased message") == "THE ERASED MESSAGE"
    assert cache.cache_info()[1:3] == (0, 0)


def test_a_text_cache_drops_its_least_recently_used_texts_first_within_entries_and_characters():
    computed: list[str] = []

    def shout(text: str) -> str:
        computed.append(text)
        return text.upper()

    cache = TextCache(shout, maxsize=3, max_chars=10)
    assert [cache(t) for t in ("aaaa", "bbbb", "aaaa")] == ["AAAA", "BBBB", "AAAA"]
    assert computed == ["aaaa", "bbbb"]
    cache("cccc")  # 12 characters: "bbbb", used least recently, goes
    assert cache.cache_info()[1:3] == (2, 8)
    cache("aaaa")
    cache("bbbb")
    assert computed == ["aaaa", "bbbb", "cccc", "bbbb"]
    for t in ("d", "e", "f"):  # entries bound too
        cache(t)
    assert cache.cache_info()[1:3] == (3, 3)
    assert cache("x" * 11) == "X" * 11 and cache.cache_info()[1:3] == (3, 3)  # over the bound: not kept


def test_a_text_cache_shared_by_threads_keeps_its_count_of_characters():
    cache = TextCache(len, maxsize=50, max_chars=400)
    texts = [str(i) * (i % 37 + 1) for i in range(300)]
    failures: list[str] = []

    def work(offset: int) -> None:
        for i in range(2_000):
            text = texts[(i * 7 + offset) % len(texts)]
            if cache(text) != len(text):
                failures.append(text)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = cache.cache_info()
    assert not failures
    assert info.chars == sum(len(k[0]) for k in cache._held) <= 400 and info.currsize <= 50
