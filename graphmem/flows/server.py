"""The graphs ``langgraph dev`` / LangGraph Server serve (see ``langgraph.json``).

Why and how, in full: docs/design.md, "Module notes", ``graphmem.flows.server``.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import Annotated, Any, cast, get_type_hints

from langgraph.channels import EphemeralValue
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph_sdk.runtime import ServerRuntime
from typing_extensions import TypedDict

from graphmem.flows.build import build_build_graph
from graphmem.flows.evolve import build_evolve_graph
from graphmem.flows.retrieve import build_retrieve_graph
from graphmem.flows.state import (
    BuildInput,
    BuildOutput,
    BuildState,
    EvolveInput,
    EvolveOutput,
    EvolveState,
    RetrieveInput,
    RetrieveOutput,
    RetrieveState,
    ServedContext,
    UpdateInput,
    UpdateOutput,
    UpdateState,
)
from graphmem.flows.update import build_update_graph
from graphmem.memory import GraphMemory

_lock = threading.Lock()
_opened: list[GraphMemory] = []


def server_memory() -> GraphMemory:
    """The memory of this server process, opened from the environment on first use."""
    with _lock:
        if not _opened:
            from graphmem.settings import Settings

            memory = Settings.from_env().open_memory()
            atexit.register(memory.close)
            _opened.append(memory)
        return _opened[0]


def per_run(state_schema: type[Any]) -> type[Any]:
    """``state_schema`` (a TypedDict) with every key held for one run only.

    On a thread LangGraph keeps a graph's state from run to run and merges each run's input into
    it, so a served retrieve found the last run's ``episode_id`` there and joined that episode
    (failing with EpisodeFinished once it was finished). Here every key is an
    :class:`~langgraph.channels.EphemeralValue` channel, which a run's input step clears unless
    the input sets it: a run starts from its own input alone, and what it wrote stays in the
    thread's state until the next run.
    """
    fields = {
        key: Annotated[hint, EphemeralValue] for key, hint in get_type_hints(state_schema).items()
    }
    # TypedDict's functional syntax; mypy checks only literal names and keys, hence the cast.
    make = cast(Callable[..., type[Any]], TypedDict)
    return make(f"PerRun{state_schema.__name__}", fields, total=False)


def _served_flow(
    flow: CompiledStateGraph[Any, Any, Any, Any],
    state_schema: type[Any],
    input_schema: type[Any],
    output_schema: type[Any],
    name: str,
) -> CompiledStateGraph[Any, ServedContext, Any, Any]:
    """``flow`` as one node over the server's memory, in the namespace the JSON context names."""

    def run(state: Any, runtime: Runtime[ServedContext]) -> dict[str, Any]:
        served = runtime.context if runtime.context is not None else ServedContext()
        context = served.memory_context(server_memory())
        return cast(dict[str, Any], flow.invoke(state, context=context))

    builder = StateGraph(
        per_run(state_schema),
        context_schema=ServedContext,
        input_schema=input_schema,
        output_schema=output_schema,
    )
    builder.add_node(name, run)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile(name=f"graphmem-{name}")


ServedGraph = CompiledStateGraph[Any, Any, Any, Any]


def refusing_unknown_context(graph: ServedGraph) -> Callable[[ServerRuntime[Any]], ServedGraph]:
    """``graph`` as a graph factory for ``langgraph.json``, one that refuses unknown context keys.

    LangGraph Server drops the context keys a graph's schema does not know before the run
    starts, so a misspelt ``{"namspace": "agent-1"}`` ran in ``default``. A factory is called
    for each run with the context as the client sent it (``runtime.execution_runtime``): this
    one fails the run with a ConfigError naming the key
    (:meth:`~graphmem.flows.state.ServedContext.refuse_unknown_keys`), and otherwise hands back
    ``graph`` itself, compiled once at import; for schemas and state reads it just hands it back.
    """
    schema = graph.context_schema
    if not (isinstance(schema, type) and issubclass(schema, ServedContext)):
        raise TypeError(f"{graph.name} does not take a ServedContext")

    def factory(runtime: ServerRuntime[Any]) -> ServedGraph:
        run = runtime.execution_runtime
        if run is not None:
            schema.refuse_unknown_keys(run.context)
        return graph

    return factory


retrieve = _served_flow(
    build_retrieve_graph().compile(), RetrieveState, RetrieveInput, RetrieveOutput, "retrieve"
)
build = _served_flow(build_build_graph().compile(), BuildState, BuildInput, BuildOutput, "build")
update = _served_flow(
    build_update_graph().compile(), UpdateState, UpdateInput, UpdateOutput, "update"
)
evolve = _served_flow(
    build_evolve_graph().compile(), EvolveState, EvolveInput, EvolveOutput, "evolve"
)
