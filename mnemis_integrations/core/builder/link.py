"""Links between nodes: `updates` (supersedes), `references`, labelled entity relations.

Decisions are pure functions over plain data; the pipeline applies them.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..text import STOPWORDS

__all__ = [
    "ENTITY_BONUS",
    "UPDATE_MARGIN",
    "UPDATE_SLACK",
    "has_change_cue",
    "pick_references",
    "pick_superseded",
    "pick_superseded_many",
    "relation_label",
    "superseded_and_best",
]

# pick_superseded_many's defaults (the builder bounds its candidate search with them too).
UPDATE_MARGIN = 0.025
UPDATE_SLACK = 0.02
ENTITY_BONUS = 0.02

# Words that announce that a decision or fact replaces an earlier one. Kept strict: a loose
# cue ("now") would mark ordinary follow-ups as replacements and demote true facts. The second
# line (finalising, rescheduling, refusing) was added for the scenario suite's reversals, e.g.
# "Renewal update: ...", "My manager approved it: a two-year renewal", "v1.3 推迟到 9 月 25 号",
# "张萌拒了我们的offer", "定价再调一次…降到每席位59元"; "Plan A looks good" and "see you Friday" still carry no cue.
_CHANGE_CUES = re.compile(
    r"\b(instead|no longer|not anymore|switch(?:ed|ing)? (?:to|over)|chang(?:ed|ing) (?:it |that )?to|"
    r"replac(?:e|ed|ing)|cancel(?:l?ed)?|scrap(?:ped)?|drop(?:ped)?|pause[ds]?|postpone[ds]?|revers(?:e|ed)|"
    r"overturn(?:ed)?|call(?:ed)? off|moved? to|go(?:ing)? with|decided against|rather than|won'?t use|"
    r"update[ds]?(?=:)|updated?|final|approved?|turned (?:it )?down|"
    r"declined|rejected|fell through|push(?:ed)? back|delay(?:ed)? to|reschedul(?:e|ed)|"
    r"can'?t approve|lower(?:ed)? (?:it |the price )?to|rais(?:e|ed) (?:it |the price )?to|adjust(?:ed|ing)?)\b|改成|改为|改用|换成|不再|取消|暂停|放弃|推翻|替换|改回|决定用|推迟|延期|改到|提前到|最终|"
    r"最后定|定下来|拒了|拒绝|黄了|没谈成|不做了|不要了|再调|调整|调到|降到|涨到",
    re.IGNORECASE,
)


def has_change_cue(text: str) -> bool:
    """True when the text announces a change of plan or fact.

    >>> has_change_cue("Let's pause plan A and do B instead."), has_change_cue("定价改成按席位收费"), has_change_cue("Plan A looks good")
    (True, True, False)
    >>> has_change_cue("Renewal update: 15% needs two years"), has_change_cue("v1.3 推迟到 9 月 25 号"), has_change_cue("see you Friday")
    (True, True, False)
    """
    return bool(_CHANGE_CUES.search(text))


def pick_superseded(
    new_vector: np.ndarray,
    new_entities: set[str],
    candidates: list[tuple[str, np.ndarray, set[str], bool]],
    threshold: float,
) -> str | None:
    """The earlier fragment a changing fragment replaces, if any.

    Args:
        new_vector: centroid of the new fragment.
        new_entities: its distinctive entity ids (too-common ones left out).
        candidates: (fragment id, centroid, distinctive entity ids, same_subtopic) of earlier active fragments.
        threshold: minimum cosine (per embedder).

    A candidate qualifies when it shares a distinctive entity or the subtopic and
    clears the threshold; the most similar one wins.

    >>> import numpy as np
    >>> pick_superseded(np.array([1.0, 0.0]), {"e:plan"}, [("old", np.array([0.95, 0.31]), {"e:plan"}, False),
    ...                                                    ("far", np.array([0.2, 0.98]), {"e:plan"}, True)], 0.8)
    'old'
    """
    best, best_sim = None, threshold
    for fid, vec, ents, same_subtopic in candidates:
        if not (ents & new_entities) and not same_subtopic:
            continue
        sim = float(vec @ new_vector)
        if sim >= best_sim:
            best, best_sim = fid, sim
    return best


def pick_superseded_many(
    cue_vectors: np.ndarray,
    new_entities: set[str],
    candidates: list[tuple[str, np.ndarray, set[str], bool]],
    threshold: float,
    *,
    margin: float = UPDATE_MARGIN,
    limit: int = 3,
    slack: float = UPDATE_SLACK,
    entity_bonus: float = ENTITY_BONUS,
) -> list[str]:
    """Earlier fragments that the change-announcing messages replace, best first.

    Args:
        cue_vectors: vectors of the new fragment's messages that carry a change cue (rows).
        new_entities: the new fragment's distinctive entity ids.
        candidates: (fragment id, its message vectors (rows), distinctive entity ids,
            same_subtopic) of earlier active fragments.
        threshold: minimum cosine (per embedder), less ``slack``: the margin rule below
            already keeps only the nearest few.
        margin: every candidate within this much of the best one is replaced too, so a
            reversal retires all the near-equal statements of the old state.
        limit: at most this many.
        entity_bonus: added to the similarity of a candidate sharing a distinctive entity.

    A candidate's similarity is its best message against the best cue message: a change
    is stated in one message, and a centroid blurs it with the small talk around it. The
    chain of ``updates`` edges links older states transitively.

    >>> import numpy as np
    >>> cue = np.array([[1.0, 0.0]])
    >>> cands = [("a", np.array([[0.99, 0.14]]), set(), False), ("b", np.array([[0.98, 0.2]]), set(), False),
    ...          ("c", np.array([[0.6, 0.8]]), set(), True)]
    >>> pick_superseded_many(cue, set(), cands, 0.9)
    ['a', 'b']
    """
    return superseded_and_best(
        cue_vectors, new_entities, candidates, threshold, margin=margin, limit=limit, slack=slack,
        entity_bonus=entity_bonus,
    )[0]


def superseded_and_best(
    cue_vectors: np.ndarray,
    new_entities: set[str],
    candidates: list[tuple[str, np.ndarray, set[str], bool]],
    threshold: float,
    *,
    margin: float = UPDATE_MARGIN,
    limit: int = 3,
    slack: float = UPDATE_SLACK,
    entity_bonus: float = ENTITY_BONUS,
) -> tuple[list[str], float | None]:
    """:func:`pick_superseded_many`'s answer and the best candidate's score (None when none
    qualified): a caller that scored only some candidates learns how high another must score
    to change the answer.

    >>> import numpy as np
    >>> superseded_and_best(np.array([[1.0, 0.0]]), set(), [("a", np.array([[0.99, 0.14]]), set(), False)], 0.9)
    (['a'], 0.99)
    """
    scored = []
    for fid, vecs, ents, same_subtopic in candidates:
        if len(vecs) == 0 or len(cue_vectors) == 0:
            continue
        sim = float(np.max(np.asarray(vecs) @ np.asarray(cue_vectors).T))
        if ents & new_entities:
            sim += entity_bonus  # the same named thing (a person, a product) is spoken of
        if sim >= threshold - slack:
            scored.append((sim, fid))
    if not scored:
        return [], None
    scored.sort(key=lambda x: (-x[0], x[1]))
    best = scored[0][0]
    return [fid for sim, fid in scored if sim >= best - margin][:limit], best


def pick_references(
    new_entities: set[str], candidates: list[tuple[str, set[str]]], limit: int, min_shared: int = 1
) -> list[str]:
    """Earlier fragments (in other subtopics) sharing the most distinctive entities.

    >>> pick_references({"a", "b"}, [("f1", {"a"}), ("f2", {"a", "b"}), ("f3", {"c"})], 2)
    ['f2', 'f1']
    """
    scored = Counter({fid: len(ents & new_entities) for fid, ents in candidates})
    return [fid for fid, c in sorted(scored.items(), key=lambda x: (-x[1], x[0])) if c >= min_shared][:limit]


def relation_label(between: str) -> str:
    """Name a relation from the words between two entities in one sentence.

    >>> relation_label(" confirmed the "), relation_label(" and "), relation_label("，确认了")
    ('confirmed', 'related_to', '确认了')
    """
    words = [w for w in re.findall(r"[\w'’]+", between.lower()) if w not in STOPWORDS and w not in {"and", "or"}]
    return "_".join(words[:3]) if words else "related_to"
