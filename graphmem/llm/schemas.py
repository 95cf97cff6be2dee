"""Pydantic models of what each LLM operation must return (and of the neighbours it is shown).

Model output is validated strictly against these (a string where a list is due is invalid and
retried); list items are normalised after validation (trimmed, de-duplicated).
"""

from __future__ import annotations

import math
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from graphmem.keywords import clean_keywords


class LLMOutput(BaseModel):
    """Base of the output models: strict types, unknown keys ignored (models add chatter)."""

    model_config = ConfigDict(strict=True, extra="ignore")


MIN_TIP_WORDS = 3
"""A tip shorter than this ("avoid", "do better") tells the next attempt nothing."""


def _clean_lines(values: list[str]) -> list[str]:
    return [" ".join(v.split()) for v in values if v.strip()]


class NoteFields(LLMOutput):
    """A-MEM note attributes."""

    keywords: list[str] = Field(min_length=1, description="Salient content words.")
    tags: list[str] = Field(default_factory=list, description="Broad labels for filtering.")
    context: str = Field(min_length=1, description="One sentence saying what the note is about.")
    category: str = Field(min_length=1, description="One word: fact, procedure, lesson...")

    @field_validator("keywords", "tags")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return clean_keywords(v)

    @field_validator("keywords")
    @classmethod
    def _non_empty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one non-empty keyword is required")
        return v

    @field_validator("context", "category")
    @classmethod
    def _text(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("must not be blank")
        return v


class TaskKeywords(LLMOutput):
    """Keywords of a task statement: the AveFact retrieval key (Mem^p)."""

    keywords: list[str] = Field(min_length=1)

    @field_validator("keywords")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        out = clean_keywords(v)
        if not out:
            raise ValueError("at least one non-empty keyword is required")
        return out


class Script(LLMOutput):
    """An abstract, reusable procedure distilled from a trajectory."""

    steps: list[str] = Field(min_length=1, description="Instructions in order, one per item.")
    notes: str = Field(default="", description="Optional caveats (e.g. why an attempt failed).")

    @field_validator("steps")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        out = _clean_lines(v)
        if not out:
            raise ValueError("at least one non-empty step is required")
        return out

    def text(self) -> str:
        """Numbered instruction text, as stored on ``Procedure.script``."""
        lines = [f"{i}. {step}" for i, step in enumerate(self.steps, start=1)]
        if self.notes.strip():
            lines.append(f"Note: {' '.join(self.notes.split())}")
        return "\n".join(lines)


class KnowledgeItem(LLMOutput):
    """Facts one episode taught about one subject."""

    subject: str = Field(min_length=1, description="What the facts are about.")
    facts: list[str] = Field(default_factory=list, description="Facts that hold beyond it.")
    retracts: list[str] = Field(default_factory=list, description="Facts it showed wrong.")

    @field_validator("subject")
    @classmethod
    def _subject(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("a subject must not be empty")
        return v[:200]

    @field_validator("facts", "retracts")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return _clean_lines(v)


class Distilled(LLMOutput):
    """What an episode taught, by subject (A-MEM-style notes distilled from a trajectory)."""

    notes: list[KnowledgeItem] = Field(default_factory=list)


class Reflection(LLMOutput):
    """What went wrong in a failed attempt and what to do instead (Mem^p adjustment)."""

    tip: str = Field(min_length=1, description="One or two sentences of advice.")
    polarity: Literal["avoid", "prefer"]
    failed_step: int | None = Field(
        default=None, ge=0, description="0-based index of the step where it went wrong."
    )
    corrected_steps: list[str] | None = Field(
        default=None, description="A corrected action sequence, when one can be given."
    )

    @field_validator("tip")
    @classmethod
    def _tip(cls, v: str) -> str:
        v = " ".join(v.split())
        if len(v.split()) < MIN_TIP_WORDS:
            raise ValueError(f"a tip is advice of at least {MIN_TIP_WORDS} words, not {v!r}")
        return v

    @field_validator("corrected_steps")
    @classmethod
    def _steps(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        return _clean_lines(v) or None


class Neighbour(BaseModel):
    """A memory shown to ``decide_links``: one of the new memory's nearest neighbours."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    sim: float = Field(description="Cosine similarity to the new memory.")
    context: str = ""
    tags: list[str] = Field(default_factory=list)


class LinkChoice(LLMOutput):
    """Link the new memory to this neighbour."""

    id: str
    reason: str = Field(min_length=1)
    strength: float = Field(ge=0.0, le=1.0)
    newer_fact: bool = Field(
        default=False,
        description="The new memory states a newer value of the fact this neighbour states "
        "(same subject, changed value): the neighbour is kept and ranks below it.",
    )

    @field_validator("strength", mode="before")
    @classmethod
    def _into_unit_range(cls, v: object) -> object:
        # A rating, not an identifier: small local models answer 1.5 or 8 (out of 10?) even
        # with the schema's bounds in the request, and the link itself is sound. A finite
        # number is clamped into [0, 1]; anything else is refused as before.
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return min(1.0, max(0.0, float(v)))
        return v


class NeighbourUpdate(LLMOutput):
    """New context and/or tags for a neighbour (A-MEM "update neighbour")."""

    id: str
    context: str | None = None
    tags: list[str] | None = None

    @field_validator("tags")
    @classmethod
    def _clean(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else clean_keywords(v)


_D = TypeVar("_D", LinkChoice, NeighbourUpdate)


class LinkDecisions(LLMOutput):
    """Which neighbours to link to, and which neighbours to refresh.

    One decision per neighbour: a second link or update naming the same id is dropped (the
    first wins), so evolution never forks one note into two live versions.
    """

    links: list[LinkChoice] = Field(description="Required, possibly empty.")
    updates: list[NeighbourUpdate] = Field(default_factory=list)

    @field_validator("links", "updates")
    @classmethod
    def _one_per_id(cls, v: list[_D]) -> list[_D]:
        seen: set[str] = set()
        out = []
        for decision in v:
            if decision.id not in seen:
                seen.add(decision.id)
                out.append(decision)
        return out

    def restricted_to(self, ids: set[str]) -> LinkDecisions:
        """Only decisions about the given neighbour ids (models sometimes invent ids)."""
        return LinkDecisions(
            links=[c for c in self.links if c.id in ids],
            updates=[u for u in self.updates if u.id in ids],
        )
