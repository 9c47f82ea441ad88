"""Cut a message stream at topic boundaries.

Three signals, not fixed windows: a long silence, a discourse cue that opens a
new topic ("anyway", "by the way", "对了"), and embedding drift (the next message
is less similar to the running segment than the embedder's drift threshold).
:class:`OfflineSegmenter` is the offline builder's segment step; :func:`open_tail`
says whether a batch may continue the namespace's latest fragment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..model import Message, Node, time_order
from ..tokens import count_tokens
from .steps import setting

if TYPE_CHECKING:
    from ..state import NamespaceState

__all__ = ["OfflineSegmenter", "open_tail", "opens_new_topic", "segment"]

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


def open_tail(st: NamespaceState, new: list[Message], max_messages: int) -> Node | None:
    """The latest fragment, if the new messages may continue it (it ends the stream and is not full)."""
    if not new or not st.messages:
        return None
    # The latest active fragment by (event time, id), never a compaction overview (its messages
    # must stay those of its originals); kept up to date by the build index, not searched for.
    last = st.build_index().open_tail(st)
    if last is None:
        return None
    last_msgs = st.fragment_messages(last.id)
    if not last_msgs or len(last_msgs) >= max_messages:
        return None
    if time_order(last_msgs[-1]) > time_order(new[0]):
        return None  # out-of-order arrival: start a fresh fragment rather than rewrite history
    return last


class OfflineSegmenter:
    """The offline segment step: the whole batch in one pass of :func:`segment`."""

    def __init__(self, config: BuildConfig, profile: EmbedderProfile):
        self.cfg = config
        self.profile = profile

    def __call__(
        self, st: NamespaceState, new: list[Message], vectors: np.ndarray, tail: list[Message]
    ) -> list[list[int]]:
        return segment(
            new,
            vectors,
            max_messages=self.cfg.max_segment_messages,
            min_messages=self.cfg.min_segment_messages,
            time_gap_minutes=self.cfg.time_gap_minutes,
            drift_threshold=setting(self.cfg, self.profile, "drift_threshold"),
            tail=(tail, st.msg_vectors.get_many([m.id for m in tail])) if tail else None,
            max_tokens=self.cfg.max_segment_tokens,
            count_tokens=count_tokens,
        )
