"""The LangChain memory tools, alone and inside a prebuilt ReAct agent driven by a scripted
tool-calling chat model (no network)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import Field

from graphmem.embedding import HashingEmbedder
from graphmem.integrations.langchain_tools import MemoryToolkit, memory_tools
from graphmem.memory import GraphMemory
from graphmem.models import Episode, EpisodeStatus, MemoryKind, Note
from graphmem.stores.base import MemoryStore


class ScriptedToolModel(BaseChatModel):
    """Replies from a script of AIMessages (tool calls or text) and records what it was sent."""

    script: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self  # type: ignore[return-value]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        reply = self.script[min(len(self.seen) - 1, len(self.script) - 1)]
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{n}"}])


@pytest.fixture
def mem(store: MemoryStore, embedder: HashingEmbedder) -> GraphMemory:
    return GraphMemory(store, embedder=embedder)


def test_tools_have_schemas_an_llm_can_call(mem: GraphMemory, namespace: str) -> None:
    search, save, report = memory_tools(mem, namespace)
    assert [t.name for t in (search, save, report)] == [
        "search_memory",
        "save_note",
        "report_outcome",
    ]
    assert set(search.args) == {"query"}
    assert set(save.args) == {"content", "tags"}
    assert set(report.args) == {"success", "reward", "used"}
    assert "query" in search.tool_call_schema.model_json_schema()["required"]
    assert all(t.description for t in (search, save, report))


def test_search_credit_and_errors(mem: GraphMemory, namespace: str) -> None:
    kit = MemoryToolkit(mem, namespace)
    search, save, report = kit.tools
    assert report.invoke({"success": True}).startswith("No memory was searched")
    assert search.invoke({"query": "anything at all"}) == "No relevant memories found."
    note_id = save.invoke({"content": "The spare key is under the blue pot."}).split()[-1][:-1]
    assert isinstance(mem.get(namespace, note_id), Note)
    found = search.invoke({"query": "where is the spare key?"})
    assert "spare key is under the blue pot" in found
    episode_id = kit.episode_id
    assert episode_id is not None
    reply = report.invoke({"success": True})
    assert f"Episode {episode_id} finished with reward 1" in reply
    episode = mem.get(namespace, episode_id)
    assert isinstance(episode, Episode) and episode.status == EpisodeStatus.FINISHED
    assert mem.get(namespace, note_id).q == pytest.approx(0.55)  # 0.5 + 0.1·(1 − 0.5)
    assert kit.episode_id is None
    # Errors come back as text the model can read, and change nothing.
    assert save.invoke({"content": "   "}).startswith("Could not save the note")
    assert search.invoke({"query": "  "}).startswith("Memory search failed")


def test_kinds_and_validation(mem: GraphMemory, namespace: str) -> None:
    kit = MemoryToolkit(mem, namespace, kinds=["Note"])
    assert kit.retrieval.kinds == (MemoryKind.NOTE,)
    with pytest.raises(ValueError):
        MemoryToolkit(mem, "bad namespace!")


def test_react_agent_uses_memory(mem: GraphMemory, namespace: str) -> None:
    from langgraph.prebuilt import create_react_agent

    mem.add_note(namespace, "To open the cellar, pull the red lever twice.")
    model = ScriptedToolModel(
        script=[
            _call("search_memory", {"query": "how do I open the cellar?"}, 1),
            _call("save_note", {"content": "The cellar holds the wine.", "tags": ["house"]}, 2),
            _call("report_outcome", {"success": True}, 3),
            AIMessage(content="Pull the red lever twice."),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents in v1
        agent = create_react_agent(model, memory_tools(mem, namespace))
    out = agent.invoke({"messages": [HumanMessage("How do I open the cellar?")]})

    tool_replies = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in tool_replies] == ["search_memory", "save_note", "report_outcome"]
    assert "pull the red lever twice" in str(tool_replies[0].content)
    # The model saw the memory before answering.
    assert any("red lever" in str(m.content) for m in model.seen[1])
    assert out["messages"][-1].content == "Pull the red lever twice."
    notes = [m for m in mem.store.iter_nodes(namespace, kinds=[MemoryKind.NOTE])]
    assert any(isinstance(n, Note) and n.content == "The cellar holds the wine." for n in notes)
    lever = next(n for n in notes if isinstance(n, Note) and "lever" in n.content)
    assert lever.q == pytest.approx(0.55) and lever.uses == 1
