"""Prompts as data, one block per LLM builder step.

Each step has a typed context (a TypedDict), a pydantic response schema whose field
descriptions also instruct the model, a ``*_messages`` function, and a worked example. The
model only ever sees small integer indices (message ``i``, fragment ``f``, fact ``n``),
never node ids. Validation beyond the schema (indices in range, coverage, grounding) lives
in the builder's ``check_*`` functions in :mod:`.llm_checks`.
"""

from __future__ import annotations

import json
from typing import Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "AbstractAnswer",
    "AbstractContext",
    "EntitiesAnswer",
    "EntitiesContext",
    "EntityItem",
    "Fact",
    "FragmentBrief",
    "FragmentSummary",
    "FragmentText",
    "Judgement",
    "Line",
    "PlacementProposal",
    "RelationItem",
    "SegmentAnswer",
    "SegmentContext",
    "SummariseAnswer",
    "SummariseContext",
    "UpdatesAnswer",
    "UpdatesContext",
    "abstract_messages",
    "entities_messages",
    "segment_messages",
    "summarise_messages",
    "updates_messages",
]


class _Answer(BaseModel):
    # Extra keys from a chatty model are ignored, not fatal.
    model_config = ConfigDict(extra="ignore")


def _shape(schema: type[BaseModel]) -> str:
    """Field-by-field instructions, taken from the schema's descriptions (nested one level)."""
    lines = []
    for name, f in schema.model_fields.items():
        lines.append(f'- "{name}": {f.description}')
        ann = f.annotation
        inner = getattr(ann, "__args__", (None,))[0]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            for sub, sf in inner.model_fields.items():
                lines.append(f'    - "{sub}": {sf.description}')
    return "\n".join(lines)


def _system(task: str, schema: type[BaseModel], example_in: dict, example_out: dict) -> str:
    return (
        f"{task}\n\nReply with one JSON object and nothing else. Its fields:\n{_shape(schema)}\n\n"
        f"Example input:\n{json.dumps(example_in, ensure_ascii=False)}\n"
        f"Example answer:\n{json.dumps(example_out, ensure_ascii=False)}"
    )


def _user(context: dict) -> str:
    return "Input:\n" + json.dumps(context, ensure_ascii=False) + "\nAnswer:"


def _messages(
    task: str, schema: type[BaseModel], example: tuple[dict, dict], context: dict
) -> list[dict[str, str]]:
    """A step's prompt: instructions, answer shape and one worked example, then the input."""
    return [
        {"role": "system", "content": _system(task, schema, *example)},
        {"role": "user", "content": _user(context)},
    ]


class Line(TypedDict):
    i: int
    speaker: str
    text: str


# ------------------------------------------------------------------------------ 1. segment


class SegmentContext(TypedDict):
    earlier: list[str]  # the end of the conversation already stored, for continuity (no indices)
    messages: list[Line]


class SegmentAnswer(_Answer):
    new_topic_at: list[int] = Field(
        description="The indices i of the messages that open a new topic, in increasing order. A topic is "
        "one matter discussed (a project, a trip, a purchase); small talk about the same matter stays in it. "
        "Include 0 only if message 0 does not continue the earlier conversation."
    )


SEGMENT_EXAMPLE: tuple[SegmentContext, dict] = (
    {
        "earlier": ["Ana: The Acme renewal is due on May 3."],
        "messages": [
            {"i": 0, "speaker": "Ben", "text": "Acme wants 40 seats on the renewal."},
            {"i": 1, "speaker": "Ana", "text": "Then quote them the team tier."},
            {"i": 2, "speaker": "Ben", "text": "Anyway, lunch on Friday?"},
            {"i": 3, "speaker": "Ana", "text": "Sure, the noodle place at noon."},
        ],
    },
    {"new_topic_at": [2]},
)


def segment_messages(ctx: SegmentContext) -> list[dict[str, str]]:
    task = (
        "You split a conversation into topics. Mark where a new topic starts: a change of subject, "
        "not a change of speaker."
    )
    return _messages(task, SegmentAnswer, SEGMENT_EXAMPLE, dict(ctx))


# ------------------------------------------------------------------------------ 2. summarise


class FragmentText(TypedDict):
    f: int
    lines: list[str]


class SummariseContext(TypedDict):
    fragments: list[FragmentText]


class FragmentSummary(_Answer):
    f: int = Field(description="The index f of the fragment summarised.")
    summary: str = Field(
        description="One sentence saying who said or decided what. Keep every name, number, date, amount "
        "and version that appears in the fragment."
    )
    keywords: list[str] = Field(description="2 to 5 lower-case keywords a person would search for.")

    @field_validator("summary")
    @classmethod
    def _one_line(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("summary is empty")
        return v


class SummariseAnswer(_Answer):
    summaries: list[FragmentSummary] = Field(description="One entry per fragment, every fragment index once.")


SUMMARISE_EXAMPLE: tuple[SummariseContext, dict] = (
    {
        "fragments": [
            {
                "f": 0,
                "lines": ["Ben: Acme wants 40 seats on the renewal.", "Ana: Then quote them the team tier."],
            }
        ]
    },
    {
        "summaries": [
            {
                "f": 0,
                "summary": "Ben said Acme wants 40 seats on the renewal and Ana chose the team tier quote.",
                "keywords": ["acme", "renewal", "seats", "team tier"],
            }
        ]
    },
)


def summarise_messages(ctx: SummariseContext) -> list[dict[str, str]]:
    task = "You summarise conversation fragments for a memory index, one sentence each."
    return _messages(task, SummariseAnswer, SUMMARISE_EXAMPLE, dict(ctx))


# ------------------------------------------------------------------------------ 3. abstract


class FragmentBrief(TypedDict):
    f: int
    summary: str
    keywords: list[str]


class ExistingSubtopic(TypedDict):
    subtopic: str
    concept: str


class AbstractContext(TypedDict):
    existing: list[ExistingSubtopic]  # subtopics already in memory, with their concept
    fragments: list[FragmentBrief]


class PlacementProposal(_Answer):
    f: int = Field(description="The index f of the fragment placed.")
    subtopic: str = Field(
        description="A short name (1-5 words) for the sub-theme this fragment belongs to. Reuse an existing "
        "subtopic name exactly when the fragment is about that sub-theme; several fragments may share one."
    )
    concept: str = Field(
        description="A short name (1-3 words) for the broad theme above the subtopic, e.g. a project, a "
        "customer or an area of life. Reuse an existing concept name exactly when it fits."
    )

    @field_validator("subtopic", "concept")
    @classmethod
    def _name(cls, v: str) -> str:
        v = " ".join(v.split()).strip(" .")
        if not v:
            raise ValueError("name is empty")
        if len(v) > 80:
            raise ValueError("name is longer than 80 characters; use a few words")
        return v


class AbstractAnswer(_Answer):
    placements: list[PlacementProposal] = Field(
        description="One entry per fragment, every fragment index once."
    )


ABSTRACT_EXAMPLE: tuple[AbstractContext, dict] = (
    {
        "existing": [{"subtopic": "Acme renewal", "concept": "Sales"}],
        "fragments": [
            {
                "f": 0,
                "summary": "Ben said Acme wants 40 seats on the renewal.",
                "keywords": ["acme", "seats"],
            },
            {
                "f": 1,
                "summary": "Ana and Ben agreed to lunch at the noodle place on Friday.",
                "keywords": ["lunch"],
            },
        ],
    },
    {
        "placements": [
            {"f": 0, "subtopic": "Acme renewal", "concept": "Sales"},
            {"f": 1, "subtopic": "Lunch plans", "concept": "Social"},
        ]
    },
)


def abstract_messages(ctx: AbstractContext) -> list[dict[str, str]]:
    task = (
        "You file conversation fragments into a two-level topic hierarchy: concept > subtopic > fragment. "
        "Put fragments about the same matter under one subtopic; never force unrelated matters together."
    )
    return _messages(task, AbstractAnswer, ABSTRACT_EXAMPLE, dict(ctx))


# ------------------------------------------------------------------------------ 4. entities


class EntitiesContext(TypedDict):
    fragments: list[FragmentText]


class EntityItem(_Answer):
    name: str = Field(
        description="The name exactly as written in the text. Only something a person could ask about on "
        "its own: a person, organisation, place, product, project, plan or version. Not a sentence, not a "
        "detail of something else, not a pronoun, not a date."
    )
    fragments: list[int] = Field(
        default_factory=list, description="The indices f of the fragments naming it."
    )


class RelationItem(_Answer):
    source: str = Field(description="An entity name from your entities list.")
    relation: str = Field(description="One to three words, e.g. 'works at', 'confirmed', 'replaced by'.")
    target: str = Field(description="Another entity name from your entities list.")


class EntitiesAnswer(_Answer):
    entities: list[EntityItem] = Field(description="The named things, each once.")
    relations: list[RelationItem] = Field(
        default_factory=list, description="Relations the text states between two of those entities."
    )


ENTITIES_EXAMPLE: tuple[EntitiesContext, dict] = (
    {
        "fragments": [
            {
                "f": 0,
                "lines": ["Ben: Acme confirmed Plan B for the renewal.", "Ana: Great, tell Dana in Berlin."],
            }
        ]
    },
    {
        "entities": [
            {"name": "Acme", "fragments": [0]},
            {"name": "Plan B", "fragments": [0]},
            {"name": "Dana", "fragments": [0]},
            {"name": "Berlin", "fragments": [0]},
        ],
        "relations": [{"source": "Acme", "relation": "confirmed", "target": "Plan B"}],
    },
)


def entities_messages(ctx: EntitiesContext) -> list[dict[str, str]]:
    task = "You extract the named entities of conversation fragments, and the relations stated between them."
    return _messages(task, EntitiesAnswer, ENTITIES_EXAMPLE, dict(ctx))


# ------------------------------------------------------------------------------ 5. updates


class Fact(TypedDict):
    n: int
    time: str
    text: str


class UpdatesContext(TypedDict):
    earlier: list[Fact]
    new: list[Fact]


class Judgement(_Answer):
    new: int = Field(description="The index n of a new fact.")
    earlier: int = Field(description="The index n of the earlier fact it is compared with.")
    verdict: Literal["updates", "contradicts", "unrelated"] = Field(
        description="'updates' if the new fact replaces the earlier one (a changed plan, a new value, a "
        "reversed decision); 'contradicts' if they cannot both be true but neither says it "
        "replaces the other; "
        "'unrelated' otherwise."
    )

    @field_validator("verdict", mode="before")
    @classmethod
    def _fold(cls, v: object) -> object:
        if isinstance(v, str):
            v = v.strip().lower()
            return {
                "update": "updates",
                "supersedes": "updates",
                "replaces": "updates",
                "contradict": "contradicts",
                "none": "unrelated",
                "no": "unrelated",
            }.get(v, v)
        return v


class UpdatesAnswer(_Answer):
    judgements: list[Judgement] = Field(
        default_factory=list, description="Only the pairs that are 'updates' or 'contradicts'; [] if none."
    )


UPDATES_EXAMPLE: tuple[UpdatesContext, dict] = (
    {
        "earlier": [
            {"n": 0, "time": "2025-03-01", "text": "Ana and Ben chose Plan A for the launch."},
            {"n": 1, "time": "2025-03-02", "text": "Ben booked the noodle place for lunch."},
        ],
        "new": [
            {"n": 2, "time": "2025-03-09", "text": "Ana paused Plan A; the launch goes with Plan B instead."}
        ],
    },
    {"judgements": [{"new": 2, "earlier": 0, "verdict": "updates"}]},
)


def updates_messages(ctx: UpdatesContext) -> list[dict[str, str]]:
    task = "You decide whether new facts replace or contradict earlier facts of the same conversation memory."
    return _messages(task, UpdatesAnswer, UPDATES_EXAMPLE, dict(ctx))
