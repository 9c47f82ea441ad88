import pytest

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder


@pytest.fixture
def toy_embedder():
    return HashingEmbedder()


@pytest.fixture
def memory(toy_embedder):
    return MnemisMemory(embedder=toy_embedder)
