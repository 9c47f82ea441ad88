"""Validation and fix-up of model answers beyond their schema (pure functions).

Each ``check_*`` returns ``(answer, errors, fixed)``: ``errors`` make the answer invalid (the
step retries, then falls back); ``fixed`` says a near-valid answer was repaired in place
(duplicates dropped, a lost number put back, an ungrounded entity removed).
"""

from __future__ import annotations

import re
from typing import TypeVar

from ..text import names, normalise_name, says_name
from .prompts import AbstractAnswer, EntitiesAnswer, SegmentAnswer, SummariseAnswer, UpdatesAnswer

__all__ = [
    "check_entities",
    "check_placements",
    "check_segments",
    "check_summaries",
    "check_updates",
    "numbers_in",
]

_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:/]\d+)*%?")
_ROLE_NAMES = frozenset({"user", "assistant", "system", "human", "ai", "bot", "tool"})
E = TypeVar("E")


def numbers_in(text: str) -> list[str]:
    """Numbers as written, in order, each once.

    >>> numbers_in("40 seats at $12.50, due 5/3; 40 again")
    ['40', '12.50', '5/3']
    """
    return list(dict.fromkeys(_NUMBER.findall(text)))


def check_segments(ans: SegmentAnswer, n: int) -> tuple[SegmentAnswer, list[str], bool]:
    """Indices must lie in [0, n); duplicates and disorder are fixed.

    >>> check_segments(SegmentAnswer(new_topic_at=[3, 0, 3]), 5)[1:]
    ([], True)
    >>> check_segments(SegmentAnswer(new_topic_at=[7]), 5)[1]
    ['new_topic_at: index 7 is not a message index (0-4)']
    """
    bad = [i for i in ans.new_topic_at if not 0 <= i < n]
    if bad:
        return ans, [f"new_topic_at: index {i} is not a message index (0-{n - 1})" for i in bad[:3]], False
    clean = sorted(set(ans.new_topic_at))
    return SegmentAnswer(new_topic_at=clean), [], clean != ans.new_topic_at


def check_summaries(
    ans: SummariseAnswer,
    texts: dict[int, str],
    max_keywords: int,
    key_names: dict[int, list[str]] | None = None,
) -> tuple[SummariseAnswer, list[str], bool]:
    """Every fragment summarised once; lost names (``key_names``: a fragment's names, in order) and
    lost numbers are put back, keywords cleaned: no summary loses key entities or numbers.

    >>> a = SummariseAnswer.model_validate(
    ...     {"summaries": [{"f": 0, "summary": "The user wants seats", "keywords": ["Seats", ""]}]}
    ... )
    >>> fixed, errors, was_fixed = check_summaries(a, {0: "Ana: 40 seats at Acme"}, 4, {0: ["Acme"]})
    >>> fixed.summaries[0].summary, fixed.summaries[0].keywords, errors, was_fixed
    ('The user wants seats (Acme, 40)', ['seats'], [], True)
    """
    seen, errors = _first_per_fragment(ans.summaries, list(texts), "summaries")
    if errors:
        return ans, errors, False
    fixed = len(seen) != len(ans.summaries)  # repeated entries were dropped
    for f, s in seen.items():
        lost_names = [n for n in (key_names or {}).get(f, []) if not says_name(s.summary, n)][:3]
        lost = lost_names + [x for x in numbers_in(texts[f]) if x not in s.summary][:3]
        if lost:
            s.summary = f"{s.summary.rstrip('.')} ({', '.join(lost)})"
            fixed = True
        kws = list(dict.fromkeys(k.strip().lower() for k in s.keywords if k.strip()))[:max_keywords]
        if kws != s.keywords:
            s.keywords = kws
            fixed = True
    return SummariseAnswer(summaries=[seen[f] for f in texts]), [], fixed


def check_placements(ans: AbstractAnswer, fragments: list[int]) -> tuple[AbstractAnswer, list[str], bool]:
    """Every fragment placed exactly once (a repeated entry keeps the first)."""
    seen, errors = _first_per_fragment(ans.placements, fragments, "placements")
    if errors:
        return ans, errors, False
    out = [seen[f] for f in fragments]
    return AbstractAnswer(placements=out), [], len(out) != len(ans.placements)


def _first_per_fragment(entries: list[E], fragments: list[int], what: str) -> tuple[dict[int, E], list[str]]:
    """The first entry for each fragment index (``entry.f``), and errors naming unknown and missing
    indices."""
    wanted = set(fragments)
    seen: dict[int, E] = {}
    errors = []
    for e in entries:
        if e.f not in wanted:
            errors.append(f"{what}: f={e.f} is not a fragment index ({sorted(wanted)})")
        elif e.f not in seen:
            seen[e.f] = e
    missing = [f for f in fragments if f not in seen]
    if missing:
        errors.append(f"{what}: no entry for fragment(s) {missing}")
    return seen, errors


def check_entities(ans: EntitiesAnswer, texts: dict[int, str]) -> tuple[EntitiesAnswer, list[str], bool]:
    """Keep only grounded names that pass the granularity rule; fix fragment lists from the text.

    A name must occur in the text of some fragment (the model may not invent or paraphrase),
    be at most five words (a sentence is not an entity) and not be a chat role. Its fragment
    list is recomputed from where the name occurs. Relations keep only kept entities.

    >>> a = EntitiesAnswer.model_validate({"entities": [{"name": "Acme"}, {"name": "the user asked about it"},
    ...     {"name": "Mars"}], "relations": [{"source": "Acme", "relation": "likes", "target": "Mars"}]})
    >>> fixed, errors, was_fixed = check_entities(a, {0: "Acme called.", 1: "Did Acme pay?"})
    >>> [(e.name, e.fragments) for e in fixed.entities], fixed.relations, errors, was_fixed
    ([('Acme', [0, 1])], [], [], True)
    """
    kept, fixed = {}, False
    for e in ans.entities:
        name = " ".join(e.name.split()).strip(" .,;:!?\"'")
        key = normalise_name(name)
        where = [f for f, t in texts.items() if name and names(t, name)]
        if not key or key in _ROLE_NAMES or len(name.split()) > 5 or not where or key in kept:
            fixed = True
            continue
        if where != e.fragments or name != e.name:
            fixed = True
        e.name, e.fragments = name, where
        kept[key] = e
    rels = []
    for r in ans.relations:
        a, b = normalise_name(r.source), normalise_name(r.target)
        if a in kept and b in kept and a != b and r.relation.strip():
            rels.append(r)
        else:
            fixed = True
    return EntitiesAnswer(entities=list(kept.values()), relations=rels), [], fixed


def check_updates(
    ans: UpdatesAnswer, earlier: set[int], new: set[int]
) -> tuple[UpdatesAnswer, list[str], bool]:
    """``new`` must index a new fact and ``earlier`` an earlier one (or a lower new one); unrelated
    pairs drop.

    >>> a = UpdatesAnswer.model_validate({"judgements": [{"new": 2, "earlier": 0, "verdict": "Update"},
    ...     {"new": 2, "earlier": 1, "verdict": "unrelated"}]})
    >>> fixed, errors, was_fixed = check_updates(a, {0, 1}, {2})
    >>> [(j.new, j.earlier, j.verdict) for j in fixed.judgements], errors, was_fixed
    ([(2, 0, 'updates')], [], True)
    """
    errors, out, fixed = [], [], False
    for j in ans.judgements:
        if j.new not in new:
            errors.append(f"judgements: new={j.new} is not a new fact index ({sorted(new)})")
        elif j.earlier not in earlier and not (j.earlier in new and j.earlier < j.new):
            errors.append(f"judgements: earlier={j.earlier} is not an earlier fact index ({sorted(earlier)})")
        elif j.verdict == "unrelated" or any((o.new, o.earlier) == (j.new, j.earlier) for o in out):
            fixed = True
        else:
            out.append(j)
    if errors:
        return ans, errors[:5], False
    return UpdatesAnswer(judgements=out), [], fixed
