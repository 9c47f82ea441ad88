"""Per-message scores on one scale across namespaces (MnemisMemory.score_messages)."""

import numpy as np
import pytest

from mnemis_integrations import InvalidNamespaceError, InvalidQueryError, MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.core.retrieval.message_match import message_match, term_coverage

TEA = {"id": "tea", "speaker": "user", "text": "I drink green tea every morning."}


@pytest.fixture
def mem():
    m = MnemisMemory(embedder=HashingEmbedder())
    m.add_messages(
        [TEA, {"id": "car", "speaker": "user", "text": "The car needs winter tyres."}], namespace="a"
    )
    m.add_messages(
        [TEA, {"id": "oolong", "speaker": "user", "text": "Oolong tea is my favourite tea."}], namespace="b"
    )
    m.add_messages([{"id": "tyres", "speaker": "user", "text": "Winter tyres for the van."}], namespace="c")
    return m


def test_one_message_scores_the_same_whatever_its_namespace_holds(mem):
    """Unlike search scores, normalised over what one namespace holds."""
    query = "which tea do I drink in the morning?"
    scores = mem.score_messages(query, {"a": ["tea", "car"], "b": ["tea", "oolong"], "c": ["tyres"]})
    assert scores[("a", "tea")] == scores[("b", "tea")]
    assert scores[("a", "tea")] > scores[("b", "oolong")] > scores[("c", "tyres")]
    assert max(scores[("a", "car")], scores[("c", "tyres")]) < scores[("b", "oolong")]


def test_unknown_ids_and_namespaces_are_left_out(mem):
    scores = mem.score_messages("tea", {"a": ["tea", "nope"], "zz": ["tea"]})
    assert set(scores) == {("a", "tea")}
    assert mem.score_messages("tea", {"a": []}) == {}


def test_bad_queries_and_namespaces_get_typed_errors(mem):
    with pytest.raises(InvalidQueryError):
        mem.score_messages("  ", {"a": ["tea"]})
    with pytest.raises(InvalidNamespaceError):
        mem.score_messages("tea", {"no space allowed": ["tea"]})


def test_term_coverage_matches_a_plain_reference():
    query, messages = {"tea", "green", "user"}, [{"tea", "user"}, {"user"}, {"green", "tea", "user"}, set()]
    n = len(messages)
    idf = {
        t: np.log(1 + (n - sum(t in m for m in messages) + 0.5) / (sum(t in m for m in messages) + 0.5))
        for t in query
    }
    reference = [sum(idf[t] for t in query & m) / sum(idf.values()) for m in messages]
    assert np.allclose(term_coverage(query, messages), reference)


def test_scores_stay_in_unit_range_and_grow_with_cosine_and_coverage():
    cos = np.array([-0.5, 0.2, 0.6, 1.0])
    terms = [set(), {"tea"}, {"tea"}, {"tea", "green"}]
    s = message_match(cos, {"tea", "green"}, terms, threshold=0.3, lexical_weight=0.35)
    assert ((0 <= s) & (s <= 1)).all() and list(s) == sorted(s)
