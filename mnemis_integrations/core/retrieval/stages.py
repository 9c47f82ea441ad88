"""What one search carries from stage to stage (``search.dual_path_search``): the query and what it
may see, the fused scores, and the final order with how each hit got its place."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..config import MemoryConfig
from ..embedders import EmbedderProfile
from ..model import Status
from ..state import NamespaceState
from .cache import PathCache
from .scope import Scope

__all__ = ["Fused", "Query", "Ranking"]


@dataclass(frozen=True)
class Query:
    """One search: its inputs and what it may see, read by every stage."""

    st: NamespaceState
    text: str
    qvec: np.ndarray
    k: int
    config: MemoryConfig
    profile: EmbedderProfile
    as_of: datetime | None
    include_archived: bool
    cache: PathCache | None
    allowed: set[str]  # the hierarchy nodes it may return
    status: dict[str, Status]  # each allowed node's status at as_of
    scope: Scope | None  # a metadata filter's scope; None without a filter
    speakers: frozenset[str]  # the speakers the query names

    @property
    def visible_key(self) -> tuple[datetime | None, bool]:
        return (self.as_of, self.include_archived)


@dataclass
class Fused:
    """Each scored node's fused score, and what each path and each lending rule gave it."""

    scores: dict[str, float]  # node id -> fused score, parent weight applied
    semantic: dict[str, float]  # node id -> normalised semantic path score
    relation: dict[str, float]  # node id -> relation path score on the fusion scale
    fallback: bool  # the relation path found too little: the semantic path alone decides
    bridged: set[str] = field(default_factory=set)  # raised by sharing an entity with a first hit
    continued: set[str] = field(default_factory=set)  # raised as the next stretch after a first hit
    dated: set[str] = field(default_factory=set)  # raised as said in the period the query names
    # held at a lending rule's ceiling: node id -> (the ceiling, what it would have been lent)
    capped: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class Ranking:
    """The hits in their final order, each one's score as shown, and the rules that placed them (a hit's
    ``via`` says which)."""

    ids: list[str]  # the hits, in order
    scores: list[float]  # each hit's score as shown, before clamping
    supplemented: list[str]  # topped up from the semantic backup to reach min_results
    moved: set[str]  # successors placed next to the superseded hit they replace
    lifted: set[str] = field(default_factory=set)  # newer hits placed before an older hit they restate
    attached: set[str] = field(default_factory=set)  # successors shown after the hits, unranked themselves
    judged: set[str] = field(default_factory=set)  # of ``moved``, placed only by a search-time judgement
