"""Links between nodes: change cues (for `updates`, judged in ``updates.py``), `references`,
labelled entity relations.

Decisions are pure functions over plain data; the pipeline applies them.
"""

from __future__ import annotations

import re
from collections import Counter

from ..text import STOPWORDS

__all__ = ["has_change_cue", "pick_references", "relation_label"]

# Words that announce that a decision or fact replaces an earlier one. Kept strict: a loose
# cue ("now") would mark ordinary follow-ups as replacements and demote true facts. The second
# line (finalising, rescheduling, refusing) was added for the scenario suite's reversals, e.g.
# "Renewal update: ...", "My manager approved it: a two-year renewal", "v1.3 推迟到 9 月 25 号",
# "张萌拒了我们的offer", "定价再调一次…降到每席位59元"; "Plan A looks good" and "see you Friday"
# still carry no cue.
_CHANGE_CUES = re.compile(
    r"\b(instead|no longer|not anymore|switch(?:ed|ing)? (?:to|over)|chang(?:ed|ing) (?:it |that )?to|"
    r"replac(?:e|ed|ing)|cancel(?:l?ed)?|scrap(?:ped)?|drop(?:ped)?|pause[ds]?|postpone[ds]?|revers(?:e|ed)|"
    r"overturn(?:ed)?|call(?:ed)? off|moved? to|go(?:ing)? with|decided against|rather than|won'?t use|"
    r"update[ds]?(?=:)|updated?|final|approved?|turned (?:it )?down|"
    r"declined|rejected|fell through|push(?:ed)? back|delay(?:ed)? to|reschedul(?:e|ed)|"
    r"can'?t approve|lower(?:ed)? (?:it |the price )?to|rais(?:e|ed) (?:it |the price )?to|"
    r"adjust(?:ed|ing)?)\b|"
    r"改成|改为|改用|换成|不再|取消|暂停|放弃|推翻|替换|改回|决定用|推迟|延期|改到|提前到|最终|"
    r"最后定|定下来|拒了|拒绝|黄了|没谈成|不做了|不要了|再调|调整|调到|降到|涨到",
    re.IGNORECASE,
)


def has_change_cue(text: str) -> bool:
    """True when the text announces a change of plan or fact.

    >>> (
    ...     has_change_cue("Let's pause plan A and do B instead."),
    ...     has_change_cue("定价改成按席位收费"),
    ...     has_change_cue("Plan A looks good"),
    ... )
    (True, True, False)
    >>> (
    ...     has_change_cue("Renewal update: 15% needs two years"),
    ...     has_change_cue("v1.3 推迟到 9 月 25 号"),
    ...     has_change_cue("see you Friday"),
    ... )
    (True, True, False)
    """
    return bool(_CHANGE_CUES.search(text))


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
    words = [
        w for w in re.findall(r"[\w'’]+", between.lower()) if w not in STOPWORDS and w not in {"and", "or"}
    ]
    return "_".join(words[:3]) if words else "related_to"
