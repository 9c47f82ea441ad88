"""A query that comes as a line of the chat ("bob: when does the migration start?") is searched without the
asker's name (``retrieval/asker.py``, ``fusion.asker_prefix``): the name says who asks, not what about."""

from __future__ import annotations

import pytest
from _memories import backend  # noqa: F401  (fixture)
from test_engine import CONVERSATION

from mnemis_integrations.core.config import MemoryConfig
from mnemis_integrations.core.retrieval.asker import without_asker

SPEAKERS = {"Ruth", "Gareth", "王妈妈"}


@pytest.mark.parametrize(
    "query, searched",
    [
        ("Ruth: what time is Esme's exam now?", "what time is Esme's exam now?"),
        ("  Gareth :  any news on the hall?", "any news on the hall?"),
        ("王妈妈：照片定了没？", "照片定了没？"),
        ("王妈妈:照片定了没？", "照片定了没？"),
        # not a speaker of the namespace, another case, or nothing after the name: the query as it is
        ("Reminder: what time is Esme's exam?", "Reminder: what time is Esme's exam?"),
        ("ruth: what time is Esme's exam?", "ruth: what time is Esme's exam?"),
        ("Ruth:", "Ruth:"),
        ("Ruth: ", "Ruth: "),
        # the name only leads a line of the chat: elsewhere it is what the question is about
        ("What did Ruth say: the 10th or the 12th?", "What did Ruth say: the 10th or the 12th?"),
        ("When is Ruth's exam?", "When is Ruth's exam?"),
    ],
)
def test_a_leading_speakers_name_and_colon_is_taken_off_the_query(query, searched):
    assert without_asker(query, SPEAKERS) == searched


@pytest.fixture
def filled(backend):  # noqa: F811
    memory = backend.open()
    memory.add_messages(CONVERSATION, namespace="u1")
    return memory


def _ranked(memory, query, **kw):
    return [(h.node_id, round(h.score, 9)) for h in memory.search(query, k=5, namespace="u1", **kw)]


def test_a_query_that_comes_as_a_line_of_the_chat_is_searched_as_the_question_alone(filled):
    bare = _ranked(filled, "When does the hosting migration start?")
    assert _ranked(filled, "bob: When does the hosting migration start?") == bare
    # with the rule off, the asker's name is searched too, and the hits change
    off = MemoryConfig().with_(fusion={"asker_prefix": False})
    assert _ranked(filled, "bob: When does the hosting migration start?", config=off) != bare


def test_a_name_that_is_no_speaker_of_the_namespace_stays_in_the_query(filled):
    assert _ranked(filled, "Acme: when is the pricing plan confirmed?") != _ranked(
        filled, "when is the pricing plan confirmed?"
    )
