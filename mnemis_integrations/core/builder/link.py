"""Links between nodes: `updates` (supersedes), `references`, labelled entity relations.

Decisions are pure functions over plain data; the pipeline applies them.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..text import STOPWORDS

__all__ = ["has_change_cue", "pick_superseded", "pick_references", "relation_label"]

# Words that announce that a decision or fact replaces an earlier one. Kept strict: a loose
# cue ("now") would mark ordinary follow-ups as replacements and demote true facts.
_CHANGE_CUES = re.compile(
    r"\b(instead|no longer|not anymore|any ?more\b|switch(?:ed|ing)? (?:to|over)|chang(?:ed|ing) (?:it |that )?to|"
    r"replac(?:e|ed|ing)|cancel(?:l?ed)?|scrap(?:ped)?|drop(?:ped)?|pause[ds]?|postpone[ds]?|revers(?:e|ed)|"
    r"overturn(?:ed)?|call(?:ed)? off|moved? to|go(?:ing)? with|decided against|rather than|won'?t use|"
    r"not going to|update[ds]?:)\b|改成|改为|改用|换成|不再|取消|暂停|放弃|推翻|替换|改回|决定用",
    re.IGNORECASE,
)


def has_change_cue(text: str) -> bool:
    """True when the text announces a change of plan or fact.

    >>> has_change_cue("Let's pause plan A and do B instead."), has_change_cue("定价改成按席位收费"), has_change_cue("Plan A looks good")
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
