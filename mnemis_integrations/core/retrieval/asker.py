"""Who asks, when a query comes as a line of a chat: "Ruth: what time is Esme's exam now?".

The memory renders every message as "Speaker: text", and an application that keeps a chat as such lines
may pass one on as the query. The name before the colon is then who asks, not what the question is
about: searched for, it pulls up that speaker's own messages (the relation path finds them as an entity,
the vector leans to them), whatever they were about.
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = ["without_asker"]

# a name of at most 40 characters, then a colon, ASCII or full-width ("王妈妈：照片定了没？")
_LINE_OF_A_CHAT = re.compile(r"\s*([^\s:：][^:：\n]{0,39}?)\s*[:：]\s*")


def without_asker(query: str, speakers: Collection[str]) -> str:
    """``query`` without a leading "Name:" where Name is one of ``speakers`` (the namespace's) and a
    question follows it; any other query as it is.

    >>> without_asker("Ruth: what time is Esme's exam now?", {"Ruth", "Gareth"})
    "what time is Esme's exam now?"
    >>> without_asker("Reminder: what time is Esme's exam?", {"Ruth"})
    "Reminder: what time is Esme's exam?"
    """
    m = _LINE_OF_A_CHAT.match(query)
    if m is None or m.group(1) not in speakers or not query[m.end() :].strip():
        return query
    return query[m.end() :]
