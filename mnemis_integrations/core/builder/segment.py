"""Cut a message stream at topic boundaries.

Three signals, not fixed windows: a long silence, a discourse cue that opens a
new topic ("anyway", "by the way", "对了"), and embedding drift (the next message
is less similar to the running segment than the embedder's drift threshold).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

import numpy as np

from ..model import Message

__all__ = ["opens_new_topic", "segment"]

_TOPIC_CUES = re.compile(
    r"^\W*(anyway|anyways|by the way|btw|speaking of|on another note|changing the subject|another thing|"
    r"unrelated|switching gears|moving on|oh,? and|also,? about|quick question)\b|"
    r"^\W*(对了|另外|换个话题|说到|顺便|还有一件事)",
    re.IGNORECASE,
)


def opens_new_topic(text: str) -> bool:
    """True when a message starts with a topic-switch cue.

    >>> (
    ...     opens_new_topic("Anyway, how did the refund go?"),
    ...     opens_new_topic("对了，定价方案呢？"),
    ...     opens_new_topic("Sure"),
    ... )
    (True, True, False)
    """
    return bool(_TOPIC_CUES.search(text))


def _gap_minutes(a: datetime | None, b: datetime | None) -> float:
    if a is None or b is None:
        return 0.0
    return abs((b - a).total_seconds()) / 60.0


def segment(
    messages: list[Message],
    vectors: np.ndarray,
    *,
    max_messages: int,
    min_messages: int,
    time_gap_minutes: float,
    drift_threshold: float,
    tail: tuple[list[Message], np.ndarray] | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> list[list[int]]:
    """Group message indices into topic segments, in order.

    Args:
        messages: new messages in time order.
        vectors: their normalised embeddings, one row each.
        tail: the last open segment already stored (messages and vectors); new messages
            may continue it. Continuation indices are negative-free: a segment that
            continues the tail is marked by starting with ``-1``.

    Returns:
        Lists of indices into ``messages``; a list starting with -1 continues the tail.
    """
    segments: list[list[int]] = []
    cur: list[int] = []
    cur_sum = np.zeros(vectors.shape[1] if len(vectors) else 1, np.float32)
    last_msg: Message | None = None
    cur_len = 0
    cur_tokens = 0
    size = count_tokens if (max_tokens and count_tokens) else None
    if tail is not None and tail[0]:
        cur = [-1]
        cur_sum = tail[1].sum(axis=0)
        cur_len = len(tail[0])
        last_msg = tail[0][-1]
        cur_tokens = sum(size(f"{m.speaker}: {m.text}") for m in tail[0]) if size else 0

    for i, (m, v) in enumerate(zip(messages, vectors, strict=True)):
        cut = False
        m_tokens = size(f"{m.speaker}: {m.text}") if size else 0
        if cur_len:
            if (
                cur_len >= max_messages
                or size
                and cur_tokens + m_tokens > max_tokens
                or last_msg is not None
                and _gap_minutes(last_msg.timestamp, m.timestamp) > time_gap_minutes
            ):
                cut = True
            elif cur_len >= min_messages:
                centroid = cur_sum / (np.linalg.norm(cur_sum) or 1.0)
                if opens_new_topic(m.text) or float(centroid @ v) < drift_threshold:
                    cut = True
        if cut:
            if cur != [-1]:
                segments.append(cur)
            cur, cur_sum, cur_len, cur_tokens = [], np.zeros_like(cur_sum), 0, 0
        cur.append(i)
        cur_sum = cur_sum + v
        cur_len += 1
        cur_tokens += m_tokens
        last_msg = m
    if cur and cur != [-1]:
        segments.append(cur)
    return segments
