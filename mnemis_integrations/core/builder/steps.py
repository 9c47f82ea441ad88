"""The build steps' contracts, and the values that travel between the steps.

A builder runs the pipeline (:func:`.pipeline.run_steps`) over one :class:`BuildSteps`: the
offline builder's (:func:`.pipeline.offline_steps`), or the LLM builder's, where each step is the
model's or the offline one as its :class:`~.llm_builder.LLMBuildConfig` says. What one step
learns about a segment reaches the next as an argument (:class:`Segment`), never through a
builder's attributes.

The order the pipeline calls them: ``segment`` the batch; ``summarise``, find ``entities`` and
``name`` the parents of the segments (batch steps, one answer per segment); then, fragment by
fragment, ``place`` a new one and let ``updates`` judge it; once every fragment is written,
``updates`` judges the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..config import BuildConfig
from ..embedders import EmbedderProfile
from ..model import Message, Node

if TYPE_CHECKING:
    from ..state import NamespaceState
    from .entities import EntityMention
    from .prompts import FragmentSummary, PlacementProposal, RelationItem

__all__ = [
    "BuildReport",
    "BuildSteps",
    "EntityFinder",
    "Namer",
    "Placer",
    "Segment",
    "Segmenter",
    "Summariser",
    "UpdateJudge",
    "setting",
]


@dataclass
class BuildReport:
    fragments_created: int = 0
    fragments_extended: int = 0
    subtopics_created: int = 0
    concepts_created: int = 0
    entities_created: int = 0
    updates_linked: int = 0
    touched: set[str] = field(default_factory=set)
    # Fragments written older than a fragment already held (an imported history), each with the
    # messages it was written with: the update step judges the later messages near those once every
    # fragment of the batch is written.
    told_late: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)


@dataclass(frozen=True)
class Segment:
    """One segment of a batch on its way to a fragment, with what the batch steps said of it.

    The model's fields stay empty where the offline steps ran: the fragment then keeps its
    extractive summary, its parents are named from keywords and its relations come from its
    sentences alone.
    """

    messages: list[Message]  # its new messages, in time order
    mentions: list[list[EntityMention]]  # the entities each of them names
    extends: Node | None  # the open fragment it continues; None for a new fragment
    summary: FragmentSummary | None = None  # the model's summary and keywords
    placement: PlacementProposal | None = None  # the model's subtopic and concept names
    relations: Sequence[RelationItem] = ()  # the model's relations between the segment's entities


def setting(config: BuildConfig, profile: EmbedderProfile, name: str) -> Any:
    """A build setting: the config's, or the embedder profile's where the config leaves it None."""
    v = getattr(config, name)
    return v if v is not None else getattr(profile, name)


class Segmenter(Protocol):
    def __call__(
        self, st: NamespaceState, new: list[Message], vectors: np.ndarray, tail: list[Message]
    ) -> list[list[int]]:
        """Indices into ``new`` per segment, in order; a first segment led by -1 continues the open
        fragment, whose messages are ``tail`` (empty when the batch may not continue it)."""
        ...


class Summariser(Protocol):
    def __call__(self, texts: list[list[Message]]) -> list[FragmentSummary | None]:
        """Per segment (its whole text, the open fragment's messages first when it continues one):
        the summary replacing the extractive one, or None to keep that."""
        ...


class EntityFinder(Protocol):
    def __call__(
        self, st: NamespaceState, new: list[Message], segments: list[list[int]]
    ) -> tuple[list[list[EntityMention]], dict[int, list[RelationItem]]]:
        """The entities each message of ``new`` names, and relations per segment index."""
        ...


class Namer(Protocol):
    def __call__(
        self,
        st: NamespaceState,
        texts: list[list[Message]],
        summaries: list[FragmentSummary | None],
        is_new: list[bool],
    ) -> dict[int, PlacementProposal]:
        """Subtopic and concept names for the new fragments' parents, by segment index (none: the
        placement founds parents named from keywords, renamed as their children change)."""
        ...


class Placer(Protocol):
    def prepare(self, st: NamespaceState) -> None:
        """Once per batch, before the first fragment is placed."""
        ...

    def place(self, st: NamespaceState, frag: Node, seg: Segment, rep: BuildReport) -> None:
        """Put a new fragment under a subtopic, founding one (and its concept) if none fits."""
        ...


class UpdateJudge(Protocol):
    def fragment_added(
        self, st: NamespaceState, frag: Node, messages: list[Message], rep: BuildReport
    ) -> None:
        """``frag`` was written with ``messages``: supersede what they replace, if judged now."""
        ...

    def batch_added(
        self, st: NamespaceState, created: list[tuple[str, list[Message]]], rep: BuildReport
    ) -> None:
        """Every fragment of the batch is written and placed; ``created``: the new ones and their messages."""
        ...


@dataclass(frozen=True)
class BuildSteps:
    """One builder's steps, in the order the pipeline runs them."""

    segment: Segmenter
    summarise: Summariser
    entities: EntityFinder
    name: Namer
    place: Placer
    updates: UpdateJudge
