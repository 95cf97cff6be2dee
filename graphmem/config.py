"""Typed configuration and named presets.

>>> MEMRL_DEFAULT.k1, MEMRL_DEFAULT.k2, MEMRL_DEFAULT.lam
(5, 3, 0.5)
>>> preset("similarity-only").lam
0.0
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from graphmem.errors import ConfigError
from graphmem.models import Granularity, GraphmemModel, KeyMode, MemoryKind


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
        default=(MemoryKind.PROCEDURE,), description="Kinds of memory to retrieve."
    )
    policy: RetrievePolicy = RetrievePolicy.SIMILARITY
    epsilon: float = Field(
        default=0.0, ge=0.0, le=1.0, description="ε-greedy exploration (off by default)."
    )
    seed: int | None = Field(default=None, description="Seed for random policy / exploration.")


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
    """When a memory is demoted: its Q stays below ``q_below`` after ``min_uses`` uses."""

    enabled: bool = Field(default=True, description="Demote during update (explicit calls work).")
    min_uses: int = Field(default=5, ge=1, description="Uses before a memory can be judged.")
    q_below: float = Field(
        default=0.25, description="Demote when q is below this (rewards {0, 1}: 0.25)."
    )
    kinds: tuple[MemoryKind, ...] = Field(
        default=(MemoryKind.NOTE, MemoryKind.TASK, MemoryKind.PROCEDURE, MemoryKind.TIP),
        description="Kinds that can be demoted.",
    )


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


class MemoryConfig(GraphmemModel):
    """Defaults of a GraphMemory instance."""

    alpha: float = Field(default=0.1, gt=0.0, le=1.0, description="Q learning rate.")
    q0: float = Field(default=0.5, description="Initial (neutral) Q of a new memory.")
    success_reward: float = 1.0
    failure_reward: float = 0.0
    granularity: Granularity = Granularity.PROCEDURALIZED
    key_mode: KeyMode = KeyMode.QUERY
    dedupe_threshold: float = Field(
        default=0.97,
        ge=0.0,
        le=1.0,
        description="Similarity above which a new memory is linked as a near-duplicate.",
    )
    max_llm_calls: int = Field(default=4, ge=0, description="LLM call cap per operation.")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    update: UpdateConfig = Field(default_factory=UpdateConfig)
    obsolescence: ObsolescenceConfig = Field(default_factory=ObsolescenceConfig)
    evolution: EvolutionConfig = Field(default_factory=EvolutionConfig)


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
