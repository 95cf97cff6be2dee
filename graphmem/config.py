"""Typed configuration and named presets.

>>> MEMRL_DEFAULT.k1, MEMRL_DEFAULT.k2, MEMRL_DEFAULT.lam
(5, 3, 0.5)
>>> preset("similarity-only").lam
0.0
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from graphmem.errors import ConfigError, InvalidInput, InvalidReward
from graphmem.models import (
    CreditPolicy,
    Granularity,
    GraphmemModel,
    KeyMode,
    MemoryKind,
    Reward,
)

DEFAULT_KINDS: tuple[MemoryKind, ...] = (MemoryKind.PROCEDURE, MemoryKind.NOTE, MemoryKind.TIP)
"""What a surface's memory search (LangChain tools, MCP, the flows' default state) looks
through unless told otherwise."""

LlmOutputMode = Literal["json_schema", "tool", "json", "prompt"]
LLM_OUTPUT_MODES: tuple[LlmOutputMode, ...] = ("json_schema", "tool", "json", "prompt")
"""How an LLM reply is constrained, strongest first: ``auto`` tries them in this order."""
LLM_OUTPUT_CHOICES: tuple[str, ...] = (*LLM_OUTPUT_MODES, "auto")
"""``GRAPHMEM_LLM_OUTPUT``'s values (see :mod:`graphmem.llm.output`)."""


class RetrievePolicy(StrEnum):
    """How candidates are found (Mem^p's retrieve policies, for ablation)."""

    SIMILARITY = "similarity"
    """Embed the query as given and recall by cosine similarity (key = query)."""
    KEYWORDS = "keywords"
    """Embed the query's extracted keywords (key = keywords, "AveFact")."""
    RANDOM = "random"
    """A random sample of the namespace's memories (the Mem^p random baseline)."""


class UpdateStrategy(StrEnum):
    """Memory-set update strategies (Mem^p)."""

    VANILLA = "vanilla"
    VALIDATION = "validation"
    ADJUSTMENT = "adjustment"


class RetrievalConfig(GraphmemModel):
    """Two-phase retrieval (MemRL): recall k1 by similarity, keep k2 by (1-λ)·ẑ(sim) + λ·ẑ(Q)."""

    k1: int = Field(default=5, ge=1, le=1000, description="Phase A: candidates recalled.")
    k2: int = Field(default=3, ge=1, le=1000, description="Phase B: memories kept.")
    lam: float = Field(default=0.5, ge=0.0, le=1.0, description="Weight of utility Q (λ).")
    floor: float = Field(default=0.0, ge=-1.0, le=1.0, description="Similarity floor.")
    kinds: tuple[MemoryKind, ...] = Field(
        default=DEFAULT_KINDS,
        description="Kinds of memory to retrieve: procedures, notes and tips by default, ranked "
        "together for one hand-over of k2 (issue 52: each kind serves other tasks).",
    )
    utility_kinds: tuple[MemoryKind, ...] = Field(
        default=(MemoryKind.PROCEDURE, MemoryKind.TIP),
        description="Kinds whose learned utility Q ranks them in phase B (experience: whether "
        "using it led to success); other kinds rank by similarity alone, as the usefulness of "
        "a fact or a passage depends on the question asked. Add Note to rank notes by Q too.",
    )
    q_scale: Literal["pool", "reward"] = Field(
        default="pool",
        description="How Q enters the score: 'pool' z-scores it over the candidates (MemRL); "
        "'reward' measures it from the neutral Q0 in half-widths of the success/failure "
        "rewards, so a Q that one or two uses moved a little counts a little.",
    )
    q_prior: Literal["q0", "source", "pool", "source-pool"] = Field(
        default="source",
        description="What phase B takes a memory's Q to be: 'q0' the stored Q (from the neutral "
        "Q0); 'source' (default) also counts a procedure's source episode (the reward of the "
        "trajectory it was built from) as its first use, so a procedure from a won game starts "
        "above one from a lost game (update's corrections have no source episode of their own "
        "and count none); 'pool' moves the weight a Q still has on Q0 to the mean "
        "reward the candidates' tried memories earned (pessimistic: an untried look-alike of a "
        "memory that failed is expected to fail too, so it is rarely tried); 'source-pool' both.",
    )
    policy: RetrievePolicy = RetrievePolicy.SIMILARITY
    epsilon: float = Field(
        default=0.0, ge=0.0, le=1.0, description="ε-greedy exploration (off by default)."
    )
    seed: int | None = Field(default=None, description="Seed for random policy / exploration.")
    abstain: bool = Field(
        default=False,
        description="K is a maximum: a candidate whose learned utility counts "
        "(``utility_kinds``) reaches the agent only if its expected reward is not below the "
        "baseline of its task cluster (what episodes like this one earn with no memory "
        "credited); the others are reported as withheld (docs/design.md, Abstention). Off by "
        "default: on the mixed stream it changed nothing on dev and cost 1 point held out.",
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="A token budget for the hand-over beside k2: hits are taken best first, "
        "any kind, while their prompt text (``Retrieval.as_prompt``, about four characters a "
        "token) fits; a hit that does not fit is withheld (reason 'token budget') and a "
        "shorter one after it may still be taken. None: k2 alone.",
    )
    choose_kinds: bool = Field(
        default=True,
        description="Utility chooses the kind per task cluster: the candidates of each kind "
        "in ``utility_kinds`` are judged together (the credited rewards of its k2 best pooled) "
        "against the "
        "baseline of the query's task cluster, and a kind expected to do worse than acting "
        "without memory is withheld as a whole; the places go to the other kinds (nothing is "
        "handed over where no kind beats the baseline). Shares abstention's probes, margin, z "
        "and cluster settings; with ``abstain`` on, each memory is judged instead (docs/design, "
        "Two kinds of memory, one budget).",
    )
    abstain_z: float = Field(
        default=0.0,
        ge=-5.0,
        le=5.0,
        description="Abstention: standard errors added to a candidate's expectation before it "
        "is compared (0: point estimates; > 0 withholds only what is surely worse).",
    )
    abstain_margin: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Abstention: how far below the baseline a "
        "candidate may be expected to fall and still be handed over.",
    )
    abstain_prior: float = Field(
        default=2.0,
        ge=0.0,
        le=1000.0,
        description="Abstention: most weight (in uses) the candidates' pooled evidence has as "
        "the prior of each candidate's expectation.",
    )
    baseline_probes: int = Field(
        default=3,
        ge=0,
        le=1000,
        description="Abstention: once memory is being credited near a query (probe_after), "
        "episodes whose task cluster has fewer no-memory episodes than this hand nothing over "
        "(probes that learn the baseline).",
    )
    probe_after: int = Field(
        default=5,
        ge=0,
        le=100_000,
        description="Abstention: credited uses the candidates must hold before a retrieval "
        "probes (memory is being learned near the query).",
    )
    cluster_k: int = Field(
        default=20, ge=1, le=1000, description="Abstention: Task nodes pooled as the cluster."
    )
    cluster_sim: float = Field(
        default=0.8,
        ge=-1.0,
        le=1.0,
        description="Abstention: least similarity of a Task node to the query to join its cluster.",
    )
    expand: Literal["off", "tasks", "links", "links+tasks"] = Field(
        default="off",
        description="Graph expansion of phase A: 'tasks' adds the procedures that solved the "
        "query's task cluster (``cluster_k``, ``cluster_sim``), 'links' the LINKS_TO neighbours "
        "of the ``expand_seeds`` best candidates; at most ``expand_k`` are added, each ranked "
        "by its own similarity (docs/design.md, Graph expansion). Off by default: it changed "
        "nothing measurable on the dev stream.",
    )
    expand_k: int = Field(
        default=10, ge=0, le=1000, description="Graph expansion: most candidates added."
    )
    expand_seeds: int = Field(
        default=5,
        ge=0,
        le=1000,
        description="Graph expansion ('links'): best candidates whose links are followed.",
    )
    hybrid: bool = Field(
        default=True,
        description="Phase A recalls by keywords too: the k1 vector candidates and the text_k "
        "best by BM25 (the stores' full-text index) are fused (``fusion``) and the fused best "
        "k1 go to phase B, which then ranks by the fused score where it would by similarity "
        "(docs/design/retrieval.md, Hybrid recall). On by default; off when ``expand`` is on "
        "and hybrid was not asked for (asking for both is refused).",
    )
    text_k: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Hybrid: keyword candidates (None: k1, at least 10 under adaptive fusion).",
    )
    fusion: Literal["adaptive", "rrf"] = Field(
        default="adaptive",
        description="Hybrid: how the two rankings are fused: reciprocal rank fusion, "
        "Σ weight / (rrf_k + rank); 'adaptive' weighs the keyword ranking per query by how "
        "far its best BM25 score stands above the others (0 to 2× text_weight), 'rrf' by "
        "text_weight alone (graphmem.ops.fusion).",
    )
    rrf_k: int = Field(default=60, ge=1, le=10_000, description="Hybrid: RRF's rank offset.")
    vector_weight: float = Field(
        default=1.0, ge=0.0, le=100.0, description="Hybrid: weight of the vector ranking."
    )
    text_weight: float = Field(
        default=1.0, ge=0.0, le=100.0, description="Hybrid: weight of the keyword ranking."
    )

    @model_validator(mode="after")
    def _expand_without_hybrid(self) -> RetrievalConfig:
        if self.expand != "off" and self.hybrid and "hybrid" not in self.model_fields_set:
            self.__dict__["hybrid"] = False  # the default yields to an explicit expand
        if self.expand != "off" and self.hybrid:
            raise ConfigError(
                "expand and hybrid cannot be combined yet: graph expansion extends the vector "
                "candidates; set expand='off' or hybrid=False"
            )
        return self


class UpdateConfig(GraphmemModel):
    """Memory-set update after a failure (Mem^p "adjustment"): how reflection is grounded."""

    reference_k: int = Field(
        default=5, ge=0, le=100, description="Procedures recalled to find a successful reference."
    )
    reference_floor: float = Field(
        default=0.35,
        ge=-1.0,
        le=1.0,
        description="Least task similarity for a successful procedure to serve as reference.",
    )
    max_tip_targets: int = Field(
        default=3, ge=0, le=100, description="Retrieved procedures one tip is attached to (ABOUT)."
    )
    max_corrections: int = Field(
        default=1, ge=0, le=100, description="Corrected procedures written per failed episode."
    )


class ObsolescenceConfig(GraphmemModel):
    """When a memory is demoted: after ``min_uses`` uses its Q is still below a threshold.

    The threshold follows the reward scale. A memory is demoted once its Q has fallen
    ``margin`` of the way from the neutral Q0 down to the failure reward::

        threshold = Q0 - margin * (Q0 - R_fail)

    ``R_fail`` is ``MemoryConfig.failure_reward``, or the bottom of the reward range
    (``reward_min``) when a failure does not pull Q below Q0 (Q0 = 0 with rewards {0, 1}).
    Shifting or scaling Q0 and the rewards together moves the threshold with them, so demotion
    decides the same way on every scale, as the z-scored ranking does: {0, 1} with Q0 = 0.5
    gives 0.25 (the historical default), ±1 with Q0 = 0 gives -0.5, ±1 with Q0 = 0.5 gives
    -0.25. A memory that only ever fails crosses it after log(1 - margin) / log(1 - α) uses
    (7 with α = 0.1). ``q_below`` sets an absolute threshold instead.

    >>> from graphmem.config import MemoryConfig
    >>> ObsolescenceConfig().threshold(MemoryConfig())
    0.25
    >>> ObsolescenceConfig().threshold(MemoryConfig(q0=0.0, failure_reward=-1.0))
    -0.5
    """

    enabled: bool = Field(default=True, description="Demote during update (explicit calls work).")
    min_uses: int = Field(default=5, ge=1, description="Uses before a memory can be judged.")
    margin: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="Demote once Q has fallen this fraction of the way from Q0 to the failure "
        "reward.",
    )
    q_below: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="An absolute threshold that replaces the one derived from Q0 and margin.",
    )
    kinds: tuple[MemoryKind, ...] = Field(
        default=(MemoryKind.NOTE, MemoryKind.PROCEDURE, MemoryKind.TIP),
        description="Kinds that can be demoted. Not Task by default: a Task's Q is the "
        "no-memory arm of its task (abstention's baseline), low where the task is hard.",
    )

    def threshold(self, memory: MemoryConfig) -> float:
        """The Q below which a used memory is demoted, for ``memory``'s Q0 and rewards."""
        if self.q_below is not None:
            return self.q_below
        low = memory.failure_reward if memory.failure_reward < memory.q0 else memory.reward_min
        return memory.q0 - self.margin * (memory.q0 - low)


class EvolutionConfig(GraphmemModel):
    """A-MEM evolution budgets: neighbours looked at, LLM calls, versions written."""

    max_neighbours: int = Field(default=5, ge=0, le=100, description="Neighbours considered.")
    min_similarity: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="No evolution with neighbours below this."
    )
    link_threshold: float = Field(
        default=0.4, ge=-1.0, le=1.0, description="Offline rule: link neighbours this similar."
    )
    max_llm_calls: int = Field(default=2, ge=0, description="LLM calls per evolved memory.")
    max_updates: int = Field(
        default=3, ge=0, le=100, description="Neighbours refreshed (as new versions) per memory."
    )


class FactUpdatesConfig(GraphmemModel):
    """Newer notes about the same thing rank above older ones (:mod:`graphmem.ops.fact_updates`).

    A new note updates an older one when both are short statements (``max_words``), share a
    subject (a name both capitalise, or both speak in the first person), the older was stated
    earlier (``valid_at``), and its similarity is at least ``min_similarity`` and within
    ``margin`` of the most similar such note. The older note is kept and still retrieved; an
    ``UPDATES`` edge and its ``updated_by`` say which note replaced it, and retrieval ranks the
    newer one right above it (pulling it in when recall missed it) when it is about as similar
    to the query (``rank_margin``).
    """

    enabled: bool = Field(
        default=True,
        description="add_note and add_notes look for the older notes a new one updates, and "
        "retrieval ranks newer statements above the ones they update.",
    )
    min_similarity: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="Least similarity of two versions of a fact."
    )
    margin: float = Field(
        default=0.2,
        ge=0.0,
        le=2.0,
        description="An older note counts only within this much of the most similar one.",
    )
    neighbours: int = Field(
        default=10, ge=1, le=100, description="Nearest notes looked at for each new note."
    )
    rank_margin: float | None = Field(
        default=0.1,
        ge=0.0,
        le=2.0,
        description="Retrieval moves a newer version above the note it updates only when its "
        "similarity to the query is at least that note's less this (it must answer the query "
        "too); None: always.",
    )
    max_words: int = Field(
        default=60,
        ge=1,
        description="Longer notes (whole sessions, documents) hold many facts: never updated.",
    )


class DistillConfig(GraphmemModel):
    """Distillation (:mod:`graphmem.ops.distill`): notes about subjects from every episode."""

    enabled: bool = Field(
        default=True,
        description="build and update turn each trajectory into notes too (one live note per "
        "subject, versioned as episodes teach more); the offline rule reads step rewards only.",
    )
    max_subjects: int = Field(
        default=20, ge=0, le=1000, description="Subjects one episode may write notes about."
    )


RetentionPolicy = Literal["utility", "recency", "lru", "fifo", "random"]
RETENTION_POLICIES: tuple[RetentionPolicy, ...] = ("utility", "recency", "lru", "fifo", "random")
"""How :mod:`graphmem.ops.retention` picks what to evict (docs/design.md, Retention)."""


class RetentionConfig(GraphmemModel):
    """A capacity per namespace: how many live memories it may hold, and what goes when full.

    Off by default (no capacity). Counted are live (not obsolete) memories of ``kinds``, one
    per retrievable unit: a proceduralized script and the trajectory it was distilled from (and
    its steps) are one memory and go together. Episodes and steps are never counted nor
    evicted.

    >>> RetentionConfig(max_memories=100).enabled
    True
    >>> RetentionConfig().enabled
    False
    """

    max_memories: int | None = Field(
        default=None,
        ge=1,
        description="Most live memories of the retained kinds a namespace holds (None: no cap).",
    )
    max_per_kind: dict[MemoryKind, int] = Field(
        default_factory=dict,
        description="A cap per kind as well (e.g. {'Note': 500}); each kind must be retained.",
    )
    policy: RetentionPolicy = Field(
        default="utility",
        description="What is evicted first: 'utility' the lowest expected reward (Q, with a "
        "procedure's source game as its first use; the running average keeps it near Q0 while "
        "uses are few), less ``confidence`` times its uncertainty, memories younger than "
        "``grace_episodes`` last; 'recency' the weakest by a forgetting "
        "curve (time since last use over 1 + uses); 'lru' the least recently used or "
        "changed (updated_at); 'fifo' the oldest written; 'random' a fixed pseudo-random "
        "order.",
    )
    on_evict: Literal["archive", "delete"] = Field(
        default="archive",
        description="'archive': mark obsolete with the reason (kept in the graph, out of "
        "recall, restorable); 'delete': remove it and what it owns.",
    )
    kinds: tuple[MemoryKind, ...] = Field(
        default=(MemoryKind.PROCEDURE, MemoryKind.NOTE, MemoryKind.TIP),
        description="Kinds counted against the capacity and evictable.",
    )
    grace_episodes: int = Field(
        default=20,
        ge=0,
        description="'utility': a memory written fewer than this many episodes ago is evicted "
        "only when nothing older is left (new memories get a chance to be tried).",
    )
    confidence: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="'utility': rank by a lower confidence bound, Q less this many reward "
        "half-ranges over sqrt(1 + uses). 0 (default, chosen on the dev range, docs/design.md): "
        "Q alone.",
    )
    seed: int = Field(default=0, description="'random': seed of the fixed eviction order.")

    @model_validator(mode="after")
    def _kinds(self) -> RetentionConfig:
        bad = [k for k in self.kinds if k in (MemoryKind.EPISODE, MemoryKind.STEP)]
        if bad:
            raise ConfigError(
                f"retention cannot evict {', '.join(bad)}: episodes are the credit record and "
                "steps belong to their procedure"
            )
        for kind, cap in self.max_per_kind.items():
            if kind not in self.kinds:
                raise ConfigError(f"max_per_kind caps {kind}, which retention.kinds leaves out")
            if cap < 1:
                raise ConfigError(f"max_per_kind[{kind}] must be at least 1, got {cap}")
        return self

    @property
    def enabled(self) -> bool:
        """Whether any capacity is set."""
        return self.max_memories is not None or bool(self.max_per_kind)


class ConsolidationConfig(GraphmemModel):
    """Consolidation (docs/design.md, "Consolidation"): look-alike memories become one
    versioned memory whose uses and Q pool their evidence, and a note that contradicts a live
    note of its subject becomes that note's new version (:mod:`graphmem.ops.consolidation`).

    Procedures merge when they belong to one task cluster (their keys at least
    ``task_similarity`` similar) and their step chains match under ``step_match``: ``exact``
    (the same actions, case, punctuation and articles folded) or ``skeleton`` (the same actions
    after a consistent renaming of their object phrases: "take red apple, slice red apple" and
    "take yellow potato, slice yellow potato"). Notes merge when they have the same subject and
    the same content (lines folded and sorted).

    >>> ConsolidationConfig().enabled
    False
    """

    enabled: bool = Field(
        default=False,
        description="Consolidate on write (build, add_note); GraphMemory.consolidate sweeps "
        "a namespace either way. Off by default (docs/design.md says what it measured).",
    )
    kinds: tuple[MemoryKind, ...] = Field(
        default=(MemoryKind.PROCEDURE, MemoryKind.NOTE),
        description="Kinds that consolidate (Procedure, Note).",
    )
    task_similarity: float = Field(
        default=0.9,
        ge=-1.0,
        le=1.0,
        description="Least cosine similarity of two procedures' keys for one task cluster.",
    )
    step_match: Literal["exact", "skeleton"] = Field(
        default="skeleton",
        description="How two procedures' steps must match: 'exact' (same normalised actions) "
        "or 'skeleton' (same after a consistent renaming of object phrases).",
    )
    note_similarity: float = Field(
        default=0.5,
        ge=-1.0,
        le=1.0,
        description="Least cosine similarity of a note looked at as a same-subject candidate.",
    )
    max_candidates: int = Field(
        default=10, ge=1, le=1000, description="Nearest memories looked at per written memory."
    )
    contradictions: bool = Field(
        default=True,
        description="A note contradicting a live note of its subject becomes its new version.",
    )
    llm_contradiction: bool = Field(
        default=False,
        description="Also ask the chat model (when one is configured) whether same-subject "
        "notes the rule finds compatible contradict each other.",
    )
    max_llm_calls: int = Field(default=2, ge=0, description="LLM calls per contradiction check.")

    @model_validator(mode="after")
    def _kinds(self) -> ConsolidationConfig:
        bad = sorted({k.value for k in self.kinds} - {"Procedure", "Note"})
        if bad:
            raise ConfigError(f"consolidation merges procedures and notes, not {', '.join(bad)}")
        return self


class MemoryConfig(GraphmemModel):
    """Defaults of a GraphMemory instance.

    Rewards must lie in ``[reward_min, reward_max]`` (default ``[-1, 1]``; MemRL and Mem^p use
    {0, 1} or ±1). Every Q starts at ``q0`` inside that range and ``Q ← Q + α(R − Q)`` keeps it
    there, so Q is bounded by the reward range.

    >>> MemoryConfig().check_reward(0.5)
    0.5
    >>> MemoryConfig().check_reward(2.0)
    Traceback (most recent call last):
    ...
    graphmem.errors.InvalidReward: reward 2.0 is outside the reward range [-1, 1]
    """

    alpha: float = Field(default=0.1, gt=0.0, le=1.0, description="Q learning rate.")
    q0: float = Field(default=0.5, description="Initial (neutral) Q of a new memory.")
    success_reward: float = 1.0
    failure_reward: float = 0.0
    reward_min: float = Field(default=-1.0, description="Lowest reward an episode may get.")
    reward_max: float = Field(default=1.0, description="Highest reward an episode may get.")
    granularity: Granularity = Granularity.PROCEDURALIZED
    key_mode: KeyMode = KeyMode.QUERY
    dedupe_threshold: float = Field(
        default=0.97,
        ge=0.0,
        le=1.0,
        description="Similarity above which a new memory is linked as a near-duplicate.",
    )
    max_llm_calls: int = Field(default=4, ge=0, description="LLM call cap per operation.")
    credit: CreditPolicy = Field(
        default=CreditPolicy.OFFERED,
        description="Which memories finish_episode credits when the call does not say: every "
        "memory the episode was offered, or only those marked used.",
    )
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    update: UpdateConfig = Field(default_factory=UpdateConfig)
    obsolescence: ObsolescenceConfig = Field(default_factory=ObsolescenceConfig)
    evolution: EvolutionConfig = Field(default_factory=EvolutionConfig)
    retention: RetentionConfig = Field(
        default_factory=RetentionConfig,
        description="A capacity per namespace and what is evicted (off by default).",
    )
    distill: DistillConfig = Field(
        default_factory=DistillConfig,
        description="Notes distilled from every episode beside its procedure (on by default).",
    )
    fact_updates: FactUpdatesConfig = Field(
        default_factory=FactUpdatesConfig,
        description="Newer notes about the same thing rank above the ones they update (on).",
    )
    consolidation: ConsolidationConfig = Field(
        default_factory=ConsolidationConfig,
        description="Look-alikes merge into one versioned memory; contradicted notes are "
        "superseded (off by default).",
    )

    @model_validator(mode="after")
    def _reward_range(self) -> MemoryConfig:
        lo, hi = self.reward_min, self.reward_max
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(f"the reward range [{lo:g}, {hi:g}] must be finite and non-empty")
        for name in ("q0", "success_reward", "failure_reward"):
            value = getattr(self, name)
            if not (math.isfinite(value) and lo <= value <= hi):
                raise ConfigError(
                    f"{name}={value:g} lies outside the reward range [{lo:g}, {hi:g}]"
                )
        return self

    def check_reward(self, reward: object) -> Reward:
        """``reward`` as a :data:`~graphmem.models.Reward` if it is a number inside the reward
        range; else InvalidReward. The one reward check: made where input enters, trusted below."""
        return Reward(self._in_range("reward", reward, InvalidReward))

    def check_q(self, q: object) -> float:
        """A Q value as a float if it lies inside the reward range; else InvalidInput."""
        return self._in_range("q", q)

    def _in_range(
        self, name: str, value: object, error: type[InvalidInput] = InvalidInput
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise error(f"{name} must be a number, got {type(value).__name__}")
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            number = math.inf if value > 0 else -math.inf
        if not (math.isfinite(number) and self.reward_min <= number <= self.reward_max):
            raise error(
                f"{name} {number!r} is outside the reward range "
                f"[{self.reward_min:g}, {self.reward_max:g}]"
            )
        return number


SIMILARITY_ONLY = RetrievalConfig(lam=0.0)
MEMRL_DEFAULT = RetrievalConfig(k1=5, k2=3, lam=0.5)
MEMP_KEYWORDS = RetrievalConfig(lam=0.0, policy=RetrievePolicy.KEYWORDS)
MEMP_RANDOM = RetrievalConfig(lam=0.0, policy=RetrievePolicy.RANDOM)

PRESETS: dict[str, RetrievalConfig] = {
    "similarity-only": SIMILARITY_ONLY,
    "memrl": MEMRL_DEFAULT,
    "memp-keywords": MEMP_KEYWORDS,
    "memp-random": MEMP_RANDOM,
}


def preset(name: str) -> RetrievalConfig:
    """A named retrieval preset, or ConfigError listing the names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown retrieval preset {name!r}; choose one of {', '.join(sorted(PRESETS))}"
        ) from None
