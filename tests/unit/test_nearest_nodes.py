"""MnemisMemory.nearest_nodes: the vector index alone, as a vector-store query expects it."""

from datetime import timedelta

import numpy as np
import pytest
from _over_time import T0, WEEKS

from mnemis_integrations import InvalidQueryError, NamespaceNotFoundError
from mnemis_integrations.core.model import NodeKind, Status

QUERY = "refund timed out at the bank callback"


@pytest.fixture
def filled(memory):
    memory.add_messages(WEEKS, namespace="u1")
    return memory


def _brute_force(memory, qvec, keep=lambda node: True):
    """Every hierarchy vector scored with numpy, in the order the index must give."""
    st = memory._state("u1")
    keys, vectors = st.node_vectors.to_arrays()
    scored = [(k, float(s)) for k, s in zip(keys, vectors @ qvec, strict=True) if keep(st.graph.get(k))]
    return sorted(scored, key=lambda pair: -pair[1])


def test_nearest_nodes_match_a_brute_force_ranking(filled):
    qvec = filled.embedder.embed_queries([QUERY])[0]
    found = filled.nearest_nodes(QUERY, k=4, namespace="u1")
    expected = _brute_force(filled, qvec)[:4]
    assert [i for i, _ in found] == [i for i, _ in expected]
    np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], rtol=1e-5)
    assert found[0][0] == "f:m1"  # the refund fragment


def test_a_vector_query_and_a_text_query_agree(filled):
    qvec = filled.embedder.embed_queries([QUERY])[0]
    by_vector = filled.nearest_nodes(vector=qvec * 3.0, k=3, namespace="u1")  # normalised on the way in
    by_text = filled.nearest_nodes(QUERY, k=3, namespace="u1")
    assert [i for i, _ in by_vector] == [i for i, _ in by_text]
    np.testing.assert_allclose([s for _, s in by_vector], [s for _, s in by_text], rtol=1e-5)


def test_keep_narrows_the_nodes_and_still_fills_k(filled):
    def concepts(node):
        return node.kind == NodeKind.CONCEPT

    found = filled.nearest_nodes(QUERY, k=2, namespace="u1", keep=concepts)
    qvec = filled.embedder.embed_queries([QUERY])[0]
    assert [i for i, _ in found] == [i for i, _ in _brute_force(filled, qvec, concepts)[:2]]


def test_archived_nodes_come_back_only_when_asked(filled):
    filled.compact(T0 + timedelta(days=10), namespace="u1")
    g = filled.graph("u1")

    def archived(nid):
        node = g.get(nid)
        return node.status == Status.ARCHIVED or node.kind == NodeKind.ARCHIVE

    assert not any(archived(i) for i, _ in filled.nearest_nodes(QUERY, k=50, namespace="u1"))
    assert any(
        archived(i) for i, _ in filled.nearest_nodes(QUERY, k=50, namespace="u1", include_archived=True)
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"query": "x", "vector": [0.0] * 256},
        {"vector": [0.1] * 8},
        {"query": "x", "k": 0},
        {"query": "  "},
    ],
)
def test_bad_queries_are_refused(filled, kwargs):
    with pytest.raises(InvalidQueryError):
        filled.nearest_nodes(namespace="u1", **kwargs)


def test_a_namespace_without_memory_is_reported(filled):
    with pytest.raises(NamespaceNotFoundError):
        filled.nearest_nodes(QUERY, namespace="nobody")
