"""Offline entity extraction, English and Chinese.

Granularity rule (SPEC §2): only something a query could ask about on its own
becomes an entity: names of people, places, organisations, products, plans and
versions. Capitalised sentence openers ("Thanks", "Yesterday") are not names
unless the same word is also seen capitalised mid-sentence. :func:`find_entities` is the
offline builder's entity step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..model import Message
from ..text import LATIN_WORD_CHAR, MONTHS, STOPWORDS, WEEKDAYS, has_cjk, jieba_tagger, normalise_name

if TYPE_CHECKING:
    from ..state import NamespaceState
    from .prompts import RelationItem

__all__ = ["EntityMention", "extract_entities", "find_entities", "named_in"]

_SENT_SPLIT = re.compile(r"(?<=[.!?。！？])\s*|\n+")
# A name's letters are word characters save Chinese ones: "好的，Acme的报价改成…" names Acme, not the clause.
_NAME_CHAR = rf"(?:{LATIN_WORD_CHAR}|['’&\-])"
_CAP_SEQ = re.compile(
    rf"\b[A-Z]{_NAME_CHAR}*(?:\s+(?:of|the|de|for)\s+[A-Z]{_NAME_CHAR}*|\s+[A-Z]{_NAME_CHAR}*)*"
)
# Only the keyword ignores case: "plan to" must not read as a plan named "to".
_PLAN_LIKE = re.compile(r"\b(?i:plan|option|version|phase|tier|project)\s+[A-Z0-9]{1,3}\b")
_VERSION = re.compile(r"\bv\d+(?:\.\d+)*\b", re.IGNORECASE)
# A short name whole, never the tail of a longer one ("ess方案" of "Business方案"), and a version
# number whole ("版本1.3" and "版本1.4" are two releases, not one "版本1").
_ZH_PLAN = re.compile(
    r"(?:方案|计划|版本|项目)(?:\d+(?:\.\d+)+|[A-Za-z0-9一二三四五甲乙丙]{1,3}(?![A-Za-z0-9]))"
    r"|(?<![A-Za-z0-9])[A-Za-z0-9]{1,3}(?:方案|计划|版)"
)
# Capitalised words that open sentences or fill chat but name nothing.
_NOT_NAMES = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "im",
        "the",
        "a",
        "an",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "this",
        "that",
        "these",
        "those",
        "it",
        "we",
        "you",
        "they",
        "he",
        "she",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "yes",
        "yeah",
        "no",
        "oh",
        "ok",
        "okay",
        "wow",
        "sure",
        "great",
        "good",
        "nice",
        "cool",
        "awesome",
        "sounds",
        "sorry",
        "please",
        "well",
        "so",
        "but",
        "and",
        "or",
        "also",
        "just",
        "really",
        "what",
        "when",
        "where",
        "why",
        "how",
        "who",
        "which",
        "yesterday",
        "today",
        "tomorrow",
        "tonight",
        "last",
        "next",
        *WEEKDAYS,
        *MONTHS,
        "mom",
        "dad",
        "lol",
        "haha",
        "omg",
        "btw",
        "anyway",
        "let",
        "let's",
        "can",
        "could",
        "would",
        "should",
        "will",
        "did",
        "do",
        "does",
        "have",
        "has",
        "had",
        "is",
        "are",
        "was",
        "were",
        "be",
        "being",
        "been",
        "if",
        "as",
        "at",
        "on",
        "in",
        "to",
        "for",
        "with",
        "by",
        "from",
        "congrats",
        "congratulations",
        "absolutely",
        "definitely",
        "totally",
        "exactly",
        "right",
        "love",
        "glad",
        "happy",
        "hope",
        "here",
        "there",
    ]
)
# Inside Chinese text there are no word boundaries, so Latin names need their own pattern.
_LATIN_IN_CJK = re.compile(r"(?<![A-Za-z])[A-Z][A-Za-z0-9]+(?:\s[A-Z][A-Za-z0-9]+)*")
_CONNECTORS = frozenset({"of", "the", "de", "for", "and", "&"})
_ZH_NAME_TAGS = {"nr", "ns", "nt", "nz", "nrt", "nrfg"}


class EntityMention(tuple):
    """(normalised key, display name)."""

    __slots__ = ()

    def __new__(cls, key: str, name: str):
        return super().__new__(cls, (key, name))

    @property
    def key(self) -> str:
        return self[0]

    @property
    def name(self) -> str:
        return self[1]


def _strip_openers(words: list[str]) -> list[str]:
    # counted, then cut once: a capitalised run of fillers ("A A A ...") is as long as the message
    lo, hi = 0, len(words)
    while lo < hi and words[lo].lower().replace("’", "'") in _NOT_NAMES:
        lo += 1
    while hi > lo and words[hi - 1].lower().replace("’", "'") in _NOT_NAMES:
        hi -= 1
    return words[lo:hi]


def _english_candidates(text: str) -> Iterable[tuple[str, bool]]:
    """Yield (name, sentence_initial) pairs."""
    for sent in _SENT_SPLIT.split(text):
        sent = sent.strip()
        if not sent:
            continue
        for m in _CAP_SEQ.finditer(sent):
            words = _strip_openers(m.group(0).split())
            if not words:
                continue
            name = " ".join(words).strip("'’-&")
            if len(name) < 2 or name.lower() in STOPWORDS:
                continue
            initial = m.start() == 0 and words[0] == m.group(0).split()[0]
            yield name, initial
            if initial and len(words) > 1:
                # "Customer Acme asked": the opener may be an ordinary word; offer the rest as a name too.
                rest = words[1:]
                while rest and rest[0].lower() in _CONNECTORS:
                    rest = rest[1:]
                if rest:
                    yield " ".join(rest), False
        for m in _PLAN_LIKE.finditer(sent):
            yield m.group(0), False
        for m in _VERSION.finditer(sent):
            yield m.group(0), False


def _chinese_candidates(text: str) -> Iterable[str]:
    for m in _LATIN_IN_CJK.finditer(text):
        if m.group(0).lower() not in _NOT_NAMES:
            yield m.group(0)
    for m in _ZH_PLAN.finditer(text):
        yield m.group(0)
    for w in jieba_tagger().cut(text):
        if w.flag in _ZH_NAME_TAGS and len(w.word) >= 2:
            yield w.word


def extract_entities(
    texts: list[str], known: set[str] | frozenset[str] = frozenset()
) -> list[list[EntityMention]]:
    """Entities per text.

    A sentence-initial capitalised single word is kept only if it is already a
    known entity key or appears capitalised mid-sentence somewhere in ``texts``.

    Examples:
        >>> texts = ["Thanks! We told Acme about Plan B.", "Yesterday was fine"]
        >>> [[m.name for m in ms] for ms in extract_entities(texts)]
        [['Acme', 'Plan B'], []]
    """
    per_text: list[list[tuple[str, bool]]] = [list(_english_candidates(t)) for t in texts]
    mid_sentence = {normalise_name(n) for cands in per_text for n, initial in cands if not initial}
    out: list[list[EntityMention]] = []
    for text, cands in zip(texts, per_text, strict=True):
        seen: dict[str, EntityMention] = {}
        for name, initial in cands:
            key = normalise_name(name)
            if not key:
                continue
            if initial and " " not in key and key not in mid_sentence and key not in known:
                continue
            seen.setdefault(key, EntityMention(key, name))
        if has_cjk(text):
            for name in _chinese_candidates(text):
                key = normalise_name(name)
                seen.setdefault(key, EntityMention(key, name))
        out.append(list(seen.values()))
    return out


def named_in(messages: list[Message]) -> list[str]:
    """The names the messages mention, in order of first mention, each once; their speakers left
    out (a speaker is in every fragment they talk in, so a summary need not repeat them).

    >>> named_in([Message("1", "Ana", "We told Acme about Plan B. Ana will call Acme.", None)])
    ['Acme', 'Plan B']
    """
    speakers = {normalise_name(m.speaker) for m in messages}
    seen: dict[str, str] = {}
    for mentions in extract_entities([m.text for m in messages]):
        for e in mentions:
            if e.key not in speakers:
                seen.setdefault(e.key, e.name)
    return list(seen.values())


def find_entities(
    st: NamespaceState, new: list[Message], segments: list[list[int]]
) -> tuple[list[list[EntityMention]], dict[int, list[RelationItem]]]:
    """The offline entity step: :func:`extract_entities` over the batch, the namespace's entities
    known; relations are read off each sentence as its fragment is written
    (:func:`~.link.link_entities`), so none come from here."""
    return extract_entities([m.text for m in new], known=st.entities.names()), {}  # type: ignore[arg-type]
