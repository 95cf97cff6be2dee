"""The memory graph as pure data: typed pydantic models, no storage logic.

Every memory node is a :class:`Memory` of one kind (Note, Task, Procedure, Step, Tip, Episode) in
a required namespace, with timestamps, provenance, utility statistics and a version/obsolete
marker. Edges are :class:`Edge` records of one :class:`EdgeKind`. See docs/design.md §1.

>>> note = Note(namespace="demo", content="Keys are usually in the hall drawer.")
>>> note.kind
'Note'
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, NewType, Self, TypeAlias, TypeVar, cast, final

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import core_schema

MAX_TEXT_CHARS = 1_000_000
"""Longest text graphmem stores in one field; larger input is rejected, not truncated."""

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/\-]{0,127}\Z")
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}\Z")

MIN_VECTOR_NORM, MAX_VECTOR_NORM = 1e-30, 1e30
"""Embedding norms every store accepts: outside them float32 dot products (the embedded store's
matrix, Neo4j's vector index) underflow or overflow."""

PropValue: TypeAlias = str | int | float | bool | None
_M = TypeVar("_M", bound=BaseModel)

EVOLVED_INTO = "evolved into "
"""Prefix of ``obsolete_reason`` of a version replaced by evolution or revision (the new id
follows); :mod:`graphmem.ops.evolve` writes it."""

CORRECTION_SOURCE = "adjustment"
"""``Memory.source`` of the procedures and steps ``update`` writes as corrections (Mem^p's
"adjustment"), and of the edges that tie them in."""


def utcnow() -> datetime:
    return datetime.now(UTC)


_ID_RNG: random.Random | None = None
_ID_LOCK = threading.Lock()


def new_id() -> str:
    """A new memory id: random (uuid4), or the next of a seeded sequence (:func:`seeded_ids`)."""
    rng = _ID_RNG
    if rng is None:
        return uuid.uuid4().hex
    with _ID_LOCK:
        return uuid.UUID(int=rng.getrandbits(128), version=4).hex


@contextmanager
def seeded_ids(seed: int) -> Iterator[None]:
    """New ids in this block (the whole process, every thread) are a sequence fixed by
    ``seed``, for benchmarks and tests that must repeat: ties in similarity are broken by id,
    so with random ids two runs of the same stream can rank tied memories differently.

    Never write seeded ids into a store that another run with the same seed wrote: the ids
    would repeat and the writes would replace that run's memories.
    """
    global _ID_RNG
    with _ID_LOCK:
        before, _ID_RNG = _ID_RNG, random.Random(seed)
    try:
        yield
    finally:
        with _ID_LOCK:
            _ID_RNG = before


def content_hash(*parts: str) -> str:
    """Stable hash of normalised text parts, used to deduplicate memories in a namespace."""
    h = hashlib.sha256()
    for part in parts:
        h.update(" ".join(part.split()).lower().encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


class MemoryKind(StrEnum):
    NOTE = "Note"
    TASK = "Task"
    PROCEDURE = "Procedure"
    STEP = "Step"
    TIP = "Tip"
    EPISODE = "Episode"


class EdgeKind(StrEnum):
    SOLVED_BY = "SOLVED_BY"
    FIRST_STEP = "FIRST_STEP"
    NEXT = "NEXT"
    DISTILLED_FROM = "DISTILLED_FROM"
    ABOUT = "ABOUT"
    LINKS_TO = "LINKS_TO"
    EVOLVED_FROM = "EVOLVED_FROM"
    SUPERSEDES = "SUPERSEDES"
    RETRIEVED = "RETRIEVED"
    UPDATES = "UPDATES"


class Granularity(StrEnum):
    TRAJECTORY = "trajectory"
    SCRIPT = "script"
    PROCEDURALIZED = "proceduralized"


class KeyMode(StrEnum):
    """What a task's retrieval key is made of (Mem^p): the query itself or its keywords."""

    QUERY = "query"
    KEYWORDS = "keywords"


class TipPolarity(StrEnum):
    AVOID = "avoid"
    PREFER = "prefer"


class EpisodeStatus(StrEnum):
    OPEN = "open"
    FINISHED = "finished"


class CreditPolicy(StrEnum):
    """Which memories an episode's reward credits (docs/design.md §2.3).

    ``offered``: every memory the episode was handed (its RETRIEVED edges); ``used``: only those
    marked used (``used: true`` on the RETRIEVED edge).
    """

    OFFERED = "offered"
    USED = "used"


def check_unicode(value: str, field: str) -> str:
    """Refuse text that cannot be written as UTF-8 (lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        from graphmem.errors import InvalidInput

        raise InvalidInput(f"{field} is not valid Unicode text (a lone surrogate?)") from e
    return value


_WALKED = (str, list, tuple, dict)
"""Field values that may hold text (a tuple: isinstance with one is faster than with a union)."""


def _check_all_text(value: Any, field: str) -> None:
    if isinstance(value, str):
        if not value.isascii():  # ASCII is valid UTF-8: the common case needs no encoding
            check_unicode(value, field)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_all_text(item, field)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_all_text(key, field)
            _check_all_text(item, field)


def _check_text(value: str, field: str, *, required: bool) -> str:
    if required and not value.strip():
        from graphmem.errors import EmptyContent

        raise EmptyContent(field)
    if len(value) > MAX_TEXT_CHARS:
        from graphmem.errors import InvalidInput

        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {MAX_TEXT_CHARS}")
    return value


@final
class Namespace(str):
    """A namespace that has been checked: 1-128 characters of letters, digits and
    ``_ . : @ / -``, starting with a letter or digit.

    Made where input enters (the API, the MCP tools, the LangGraph store, the served graphs,
    the CLI); the layers below take one on trust (docs/architecture.md, "Where input is
    checked"). ``Namespace(value)`` checks a plain string and hands a Namespace back as it
    is, so a surface over another surface checks once; a model's ``namespace`` field does
    the same.

    >>> Namespace("team/alice")
    'team/alice'
    >>> Namespace("no spaces")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    graphmem.errors.InvalidNamespace: invalid namespace 'no spaces': use 1-128 characters...
    """

    __slots__ = ()

    def __new__(cls, value: object) -> Namespace:
        return value if isinstance(value, Namespace) else check_namespace(value)

    def __copy__(self) -> Namespace:
        return self

    def __deepcopy__(self, memo: object) -> Namespace:  # a model's deep copy: no re-check
        return self

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # A plain string is checked; a Namespace passes (its JSON Schema is a string's).
        def validate(value: Any, as_str: core_schema.ValidatorFunctionWrapHandler) -> Namespace:
            return value if isinstance(value, Namespace) else check_namespace(as_str(value))

        return core_schema.no_info_wrap_validator_function(validate, core_schema.str_schema())


def check_namespace(namespace: object) -> Namespace:
    """The namespace check: ``namespace`` as a :class:`Namespace`, else InvalidNamespace.

    Every check of a namespace is a call of this function (tests count them); code that has
    a Namespace already calls nothing.
    """
    from graphmem.errors import InvalidNamespace

    if not isinstance(namespace, str) or not namespace:
        raise InvalidNamespace("a namespace is required (a non-empty string)")
    if not NAMESPACE_RE.match(namespace):
        raise InvalidNamespace(
            f"invalid namespace {namespace[:80]!r}: use 1-128 characters of letters, digits and "
            "_ . : @ / - (starting with a letter or digit)"
        )
    return str.__new__(Namespace, namespace)


Reward = NewType("Reward", float)
"""A reward checked against a config's reward range: made by
:meth:`graphmem.config.MemoryConfig.check_reward` where input enters, trusted below."""


def check_id(memory_id: str) -> str:
    """Return ``memory_id`` if it is valid, else raise :class:`InvalidInput`."""
    from graphmem.errors import InvalidInput

    if not isinstance(memory_id, str) or not ID_RE.match(memory_id):
        raise InvalidInput(
            f"invalid memory id {str(memory_id)[:80]!r}: use 1-128 characters of letters, digits "
            "and _ . : - (starting with a letter or digit)"
        )
    return memory_id


def check_vector(vector: Any, dimension: int | None = None) -> list[float]:
    """Validate an embedding: a flat sequence of finite floats of the expected dimension."""
    values: list[float] = check_vector_array(vector, dimension).tolist()
    return values


def check_vector_array(vector: Any, dimension: int | None = None) -> npt.NDArray[np.float64]:
    """:func:`check_vector` for callers that go on in numpy (a store's query): the float64
    array, without the round trip through a Python list."""
    return check_vector_norm(vector, dimension)[0]


def check_vector_norm(
    vector: Any, dimension: int | None = None
) -> tuple[npt.NDArray[np.float64], float]:
    """:func:`check_vector_array` and the vector's norm."""
    from graphmem.errors import DimensionMismatch, InvalidVector

    if isinstance(vector, str | bytes):  # a string of digits is not a vector
        raise InvalidVector("an embedding must be a flat sequence of numbers, not text")
    # numpy converts and checks in C: a per-item Python loop cost more than the Neo4j round
    # trip of a recall, which validates every embedding it reads back.
    try:
        items = vector if isinstance(vector, list | tuple | np.ndarray) else list(vector)
        array = np.asarray(items, dtype=np.float64)
    except OverflowError as e:  # an integer beyond float range, e.g. 10**400
        raise InvalidVector("an embedding must contain only finite numbers") from e
    except (TypeError, ValueError) as e:
        raise InvalidVector("an embedding must be a flat sequence of numbers") from e
    if array.ndim != 1:
        raise InvalidVector("an embedding must be a flat sequence of numbers")
    if not array.size:
        raise InvalidVector("an embedding must not be empty")
    if dimension is not None and array.size == dimension:
        # The usual case in one product: a norm in bounds is finite, so no item is NaN or
        # infinite (either makes it NaN or inf). Anything else, including an overflow or an
        # underflow of the plain product, takes the careful path below (vdot, unlike dot and
        # matmul, does not warn of an overflow).
        norm = math.sqrt(float(np.vdot(array, array)))
        if MIN_VECTOR_NORM <= norm <= MAX_VECTOR_NORM:
            return (array.copy() if array is vector else array), norm
    if not np.isfinite(array).all():
        raise InvalidVector("an embedding must contain only finite numbers (no NaN or inf)")
    if dimension is not None and array.size != dimension:
        raise DimensionMismatch(dimension, int(array.size))
    scale = float(np.abs(array).max())
    if scale == 0.0:
        raise InvalidVector("an embedding must not be all zeros")
    norm = scale * float(np.linalg.norm(array / scale))  # scaled: no overflow or underflow
    if not MIN_VECTOR_NORM <= norm <= MAX_VECTOR_NORM:
        raise InvalidVector(
            f"embedding norm {norm:.3g} is outside [{MIN_VECTOR_NORM:g}, {MAX_VECTOR_NORM:g}]"
        )
    if array is vector:  # the caller's own array: a private one
        array = array.copy()
    return array, norm


def construct(
    cls: type[_M],
    values: dict[str, Any],
    fields_set: Iterable[str] | None = None,
    *,
    private: dict[str, Any] | None = None,
) -> _M:
    """A ``cls`` holding ``values`` as they are: every field given, all of them valid already
    (what pydantic's ``model_construct`` does, without its per-field work, which cost a
    retrieval at 1k memories more than its vector search). ``fields_set``: the fields marked
    as set (default: all of them). ``private``: the values of the model's private attributes,
    every one of them (a model with none takes None)."""
    names = cls.__private_attributes__
    if (private or {}).keys() != names.keys():
        raise TypeError(f"{cls.__name__} takes private attributes {sorted(names)}")
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(
        model, "__pydantic_fields_set__", set(values if fields_set is None else fields_set)
    )
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", private if names else None)
    return model


def as_graphmem_error(e: ValidationError, what: str) -> Exception:
    """Turn pydantic's ValidationError into the GraphmemError its validator meant to raise."""
    from graphmem.errors import GraphmemError, InvalidInput

    for err in e.errors():
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, GraphmemError):
            return original
    first = e.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or what
    return InvalidInput(f"invalid {what}: {loc}: {first.get('msg', 'invalid value')}")


class GraphmemModel(BaseModel):
    """Base of graphmem's input models: invalid input raises a GraphmemError, not pydantic's.

    Every text field, wherever it sits, must be valid Unicode (encodable as UTF-8).
    """

    @model_validator(mode="after")
    def _unicode_text(self) -> Self:
        for name, value in self.__dict__.items():  # the fields, without a getattr each
            # An embedding is floats (pydantic has coerced it): walking its hundreds of items
            # on every model built cost recall more than its vector search at 1k memories.
            if name != "embedding" and isinstance(value, _WALKED):
                _check_all_text(value, name)
        return self

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise as_graphmem_error(e, type(self).__name__) from e

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as e:
            raise as_graphmem_error(e, f"{type(self).__name__}.{name}") from e


class Memory(GraphmemModel):
    """Fields every memory node has, whatever its kind."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=new_id, description="Unique within the namespace.")
    namespace: Namespace = Field(description="Tenant / agent / user scope. Required.")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    source: str = Field(
        default="api", description="Provenance: which operation made it (build, note, reflect...)."
    )
    source_ref: str | None = Field(
        default=None, description="Provenance: e.g. the episode or trajectory it came from."
    )
    created_by: str = Field(
        default="fallback", description="Provenance: the model that wrote it, or 'fallback'."
    )
    q: float = Field(default=0.5, description="Learned utility (MemRL Q value).")
    q_updates: int = Field(default=0, ge=0, description="How many rewards moved q.")
    uses: int = Field(default=0, ge=0, description="How many finished episodes retrieved it.")
    successes: int = Field(default=0, ge=0, description="How many of those episodes succeeded.")
    version: int = Field(default=1, ge=1)
    obsolete: bool = Field(default=False, description="Skipped by retrieval; kept in the graph.")
    obsolete_reason: str | None = None
    content_hash: str | None = Field(default=None, description="For deduplication.")
    embedding: list[float] | None = Field(default=None, repr=False, exclude=False)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        return check_id(v)

    @field_validator("q")
    @classmethod
    def _q(cls, v: float) -> float:
        if not math.isfinite(v):
            from graphmem.errors import InvalidInput

            raise InvalidInput("q must be a finite number")
        return v

    @field_validator("embedding")
    @classmethod
    def _embedding(cls, v: list[float] | None) -> list[float] | None:
        return None if v is None else check_vector(v)

    def embed_text(self) -> str:
        """The text whose embedding is this memory's retrieval key."""
        raise NotImplementedError


class Note(Memory):
    """A Zettelkasten note (A-MEM): one atomic piece of knowledge or experience."""

    kind: Literal["Note"] = "Note"
    content: str
    keywords: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    context: str = Field(default="", description="One-sentence description of the note.")
    category: str = ""
    data: str | None = Field(
        default=None,
        description="Optional JSON payload kept verbatim (e.g. a LangGraph store item's value).",
    )
    valid_at: datetime | None = Field(
        default=None,
        description="When the fact was stated or observed (e.g. the date of the conversation "
        "turn it comes from); add_note sets the time of writing when not given. A time "
        "without a zone is taken as UTC.",
    )
    updated_by: str | None = Field(
        default=None,
        description="The id of a newer note about the same thing (its UPDATES edge points "
        "here): this note is kept and still retrieved, but ranks below that one "
        "(graphmem.ops.fact_updates).",
    )

    @field_validator("valid_at")
    @classmethod
    def _valid_at(cls, v: datetime | None) -> datetime | None:
        return v if v is None or v.tzinfo is not None else v.replace(tzinfo=UTC)

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return _check_text(v, "content", required=True)

    @field_validator("data")
    @classmethod
    def _data(cls, v: str | None) -> str | None:
        if v is None:
            return v
        _check_text(v, "data", required=False)
        try:
            json.loads(v)
        except ValueError as e:
            from graphmem.errors import InvalidInput

            raise InvalidInput(f"data must be a JSON document: {e}") from e
        return v

    def embed_text(self) -> str:
        parts = [self.content, self.context, " ".join(self.keywords), " ".join(self.tags)]
        return "\n".join(p for p in parts if p)


class Task(Memory):
    """A task instance the agent faced."""

    kind: Literal["Task"] = "Task"
    text: str
    key: str = Field(description="Retrieval key: the task text or its extracted keywords.")
    key_mode: KeyMode = KeyMode.QUERY

    @field_validator("text", "key")
    @classmethod
    def _text(cls, v: str) -> str:
        return _check_text(v, "task text", required=True)

    def embed_text(self) -> str:
        return self.key


class Procedure(Memory):
    """Procedural memory built from a trajectory (Mem^p)."""

    kind: Literal["Procedure"] = "Procedure"
    task_text: str
    key: str = Field(description="Retrieval key (task text or keywords).")
    granularity: Granularity
    script: str | None = Field(default=None, description="Abstract reusable instructions.")
    reward: float = 0.0
    success: bool = False
    n_steps: int = Field(default=0, ge=0)

    @field_validator("task_text", "key")
    @classmethod
    def _text(cls, v: str) -> str:
        return _check_text(v, "task text", required=True)

    def embed_text(self) -> str:
        return self.key


class Step(Memory):
    """One step of a trajectory, chained FIRST_STEP / NEXT from its Procedure."""

    kind: Literal["Step"] = "Step"
    procedure_id: str
    index: int = Field(ge=0)
    thought: str = ""
    action: str
    observation: str = ""

    @field_validator("action")
    @classmethod
    def _action(cls, v: str) -> str:
        return _check_text(v, "step action", required=True)

    def embed_text(self) -> str:
        return self.action


class Tip(Memory):
    """A reflection: what went wrong or what to do (Mem^p adjustment, EMPO² tips)."""

    kind: Literal["Tip"] = "Tip"
    text: str
    polarity: TipPolarity = TipPolarity.PREFER
    task_text: str = ""

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        return _check_text(v, "tip text", required=True)

    def embed_text(self) -> str:
        return f"{self.task_text}\n{self.text}" if self.task_text else self.text


class Episode(Memory):
    """One run of the agent using memory: the unit of credit assignment."""

    kind: Literal["Episode"] = "Episode"
    task_text: str
    status: EpisodeStatus = EpisodeStatus.OPEN
    reward: float | None = None
    success: bool | None = None
    finished_at: datetime | None = None
    retrieval_config: str = Field(default="", description="The RetrievalConfig used, as JSON.")
    credit: CreditPolicy | None = Field(
        default=None,
        description="Which memories the reward credited (offered or used), set when the episode "
        "finishes; None while open.",
    )

    @field_validator("task_text")
    @classmethod
    def _text(cls, v: str) -> str:
        return _check_text(v, "episode task", required=True)

    def embed_text(self) -> str:
        return self.task_text


AnyMemory = Annotated[Note | Task | Procedure | Step | Tip | Episode, Field(discriminator="kind")]
MEMORY_ADAPTER: TypeAdapter[AnyMemory] = TypeAdapter(AnyMemory)

MEMORY_CLASSES: dict[MemoryKind, type[Memory]] = {
    MemoryKind.NOTE: Note,
    MemoryKind.TASK: Task,
    MemoryKind.PROCEDURE: Procedure,
    MemoryKind.STEP: Step,
    MemoryKind.TIP: Tip,
    MemoryKind.EPISODE: Episode,
}

MEMORY_KIND_VALUES = frozenset(kind.value for kind in MemoryKind)

UTILITY_FIELDS = frozenset({"q", "q_updates", "uses", "successes"})
"""Fields only the store's atomic utility update changes."""

IMMUTABLE_FIELDS = frozenset({"id", "namespace", "kind", "created_at"})


RESERVED_EDGE_PROPS = frozenset({"created_at", "namespace", "kind", "src", "dst"})
"""Edge property names the stores use themselves."""


class Edge(GraphmemModel):
    """A typed, directed edge between two memories of the same namespace.

    Identity is (namespace, kind, src, dst): writing it again merges ``props``.
    """

    model_config = ConfigDict(extra="forbid")

    namespace: Namespace
    kind: EdgeKind
    src: str
    dst: str
    props: dict[str, PropValue] = Field(
        default_factory=dict,
        description="Edge properties. RETRIEVED: rank, sim, q, z_sim, z_q, score, explored (what "
        "the episode was handed and why), used (true once the caller marked it used), q_after "
        "and alpha (set on the memories the finish credited).",
    )
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("src", "dst")
    @classmethod
    def _ids(cls, v: str) -> str:
        return check_id(v)

    @field_validator("props")
    @classmethod
    def _props(cls, v: dict[str, PropValue]) -> dict[str, PropValue]:
        from graphmem.errors import InvalidInput

        for key, value in v.items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z", key):
                raise InvalidInput(f"invalid edge property name {key[:80]!r}")
            if key in RESERVED_EDGE_PROPS:
                raise InvalidInput(f"edge property name {key!r} is reserved")
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"edge property {key!r} must be finite")
            if isinstance(value, str):
                _check_text(value, f"edge property {key!r}", required=False)
        # Neo4j cannot store null properties; drop them so every store reads back the same.
        return {key: value for key, value in v.items() if value is not None}

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.namespace, self.kind.value, self.src, self.dst)


class Hit(BaseModel):
    """One retrieved memory with the parts of its score (docs/design.md §2.2)."""

    memory: AnyMemory
    rank: int = Field(ge=0, description="0-based rank in the final selection.")
    sim: float = Field(description="Cosine similarity of query and key embedding.")
    q: float = Field(description="The memory's utility at retrieval time.")
    z_sim: float = 0.0
    z_q: float = 0.0
    score: float = Field(description="(1-λ)·z_sim + λ·z_q over the candidate pool.")
    vector_rank: int | None = Field(
        default=None,
        description="Hybrid recall: 1-based rank among the vector candidates (None: not one).",
    )
    text_rank: int | None = Field(
        default=None,
        description="Hybrid recall: 1-based rank among the keyword candidates (None: not one).",
    )
    fused: float | None = Field(
        default=None,
        description="Hybrid recall: the fused score (RRF) that z_sim standardises; None when "
        "recall was by vector alone.",
    )
    expected: float | None = Field(
        default=None,
        description="Abstention: the reward this memory is expected to earn when used (its "
        "credited rewards shrunk towards its neighbours'); None when not judged.",
    )
    withheld: str | None = Field(
        default=None,
        description="Abstention: why this candidate was not handed over (None: handed over).",
    )
    newer_than: str | None = Field(
        default=None,
        description="Fact updates: the id of the older note this one was ranked above, as its "
        "newer statement (None: ranked by its own score).",
    )


class TrajectoryStep(GraphmemModel):
    """One step of an agent trajectory given to ``build``."""

    model_config = ConfigDict(extra="forbid")

    thought: str = ""
    action: str
    observation: str = ""
    reward: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="The reward this step earned, if the environment gives one per step "
        "(distillation reads it: an action that earned or cost reward is a fact).",
    )

    @field_validator("action")
    @classmethod
    def _action(cls, v: str) -> str:
        # Refused here, as the stored Step would refuse it, so build refuses before it embeds
        # anything (embedding records the namespace's embedder: a refused call changes nothing).
        return _check_text(v, "step action", required=True)


class Trajectory(GraphmemModel):
    """An agent trajectory: the task, its steps, and how it ended."""

    model_config = ConfigDict(extra="forbid")

    task: str
    steps: list[TrajectoryStep]
    reward: float = 0.0
    success: bool = False
    metadata: dict[str, PropValue] = Field(default_factory=dict)

    @field_validator("task")
    @classmethod
    def _task(cls, v: str) -> str:
        return _check_text(v, "trajectory task", required=True)


def memory_from_dict(data: dict[str, Any]) -> AnyMemory:
    """Validate a plain dict (e.g. an export line or a Neo4j node) into its memory model."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if (
        isinstance(kind, str)
        and kind in MEMORY_KIND_VALUES
        and all(isinstance(key, str) for key in data)
    ):
        cls = MEMORY_CLASSES[MemoryKind(kind)]
        # The class itself validates once; the union adapter would call its __init__ (which
        # validates) and then run the model's validators a second time.
        return cast(AnyMemory, cls(**data))
    try:
        return MEMORY_ADAPTER.validate_python(data)
    except ValidationError as e:
        raise as_graphmem_error(e, "memory") from e
