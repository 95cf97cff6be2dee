"""graphmem: long-term memory for LLM agents that learns which memories help."""

from graphmem.config import (
    MEMRL_DEFAULT,
    SIMILARITY_ONLY,
    MemoryConfig,
    RetrievalConfig,
    RetrievePolicy,
    UpdateStrategy,
    preset,
)
from graphmem.embedding import (
    Embedder,
    HashingEmbedder,
    LangChainEmbedder,
    SentenceTransformerEmbedder,
)
from graphmem.errors import (
    DimensionMismatch,
    EmbedderMismatch,
    EmptyContent,
    GraphmemError,
    ImportFormatError,
    InvalidInput,
    InvalidNamespace,
    InvalidVector,
    LLMError,
    MemoryNotFound,
    StoreError,
)
from graphmem.memory import GraphMemory
from graphmem.models import (
    CreditPolicy,
    Edge,
    EdgeKind,
    Episode,
    Granularity,
    Hit,
    KeyMode,
    MemoryKind,
    Note,
    Procedure,
    Step,
    Task,
    Tip,
    Trajectory,
    TrajectoryStep,
)
from graphmem.ops.reembed import reembed
from graphmem.stores.base import AsyncMemoryStore, MemoryStore
from graphmem.stores.embedded import EmbeddedStore

__version__ = "0.1.0"

__all__ = [
    "MEMRL_DEFAULT",
    "SIMILARITY_ONLY",
    "AsyncMemoryStore",
    "CreditPolicy",
    "DimensionMismatch",
    "Edge",
    "EdgeKind",
    "EmbeddedStore",
    "Embedder",
    "EmbedderMismatch",
    "EmptyContent",
    "Episode",
    "Granularity",
    "GraphMemory",
    "GraphmemError",
    "HashingEmbedder",
    "Hit",
    "ImportFormatError",
    "InvalidInput",
    "InvalidNamespace",
    "InvalidVector",
    "KeyMode",
    "LLMError",
    "LangChainEmbedder",
    "MemoryConfig",
    "MemoryKind",
    "MemoryNotFound",
    "MemoryStore",
    "Note",
    "Procedure",
    "RetrievalConfig",
    "RetrievePolicy",
    "SentenceTransformerEmbedder",
    "Step",
    "StoreError",
    "Task",
    "Tip",
    "Trajectory",
    "TrajectoryStep",
    "UpdateStrategy",
    "__version__",
    "preset",
    "reembed",
]
