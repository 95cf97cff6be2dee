"""The ``--llm`` agent on a real OpenAI-compatible server (tests/openai_stub.py) through the real
``ChatOpenAI``: the policy's calls share the memory's client and accounting, and a stream of games
survives a server that fails, hangs or refuses the key."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_stub import OpenAIStub

from graphmem import GraphMemory, HashingEmbedder
from graphmem.agents import Observation, StepResult
from graphmem.llm import MemoryLLM
from graphmem.stores.embedded import EmbeddedStore
from showcase.envs.agents import ChatPolicy, Explorer
from showcase.textworld_agent import PROCEDURE_RETRIEVAL, run_stream

SEEDS = [0, 1, 2]


class DoorGame:
    """Take the key, then open the door: solved in two steps, budget six."""

    step_budget = 6

    def reset(self, seed: int, fold: str = "test") -> Observation:
        self.has_key = False
        self.moves = 0
        return self._observe("You are in the hall. A key lies on the floor; the door is locked.")

    def _observe(self, text: str, *, done: bool = False, success: bool = False) -> Observation:
        valid = ("open door", "look around") if self.has_key else ("take key", "open door")
        carried = "You are carrying:\n  a key" if self.has_key else "You are carrying nothing."
        return Observation(
            task="Leave the hall.", text=text, valid_actions=valid, inventory=carried,
            done=done, success=success, score=1.0 if success else 0.0,
        )  # fmt: skip

    def step(self, action: str) -> StepResult:
        self.moves += 1
        reward, success = 0.0, False
        if action == "take key" and not self.has_key:
            self.has_key, reward, text = True, 0.5, "You take the key."
        elif action == "open door" and self.has_key:
            reward, success, text = 0.5, True, "You unlock the door and leave. You won!"
        else:
            text = "Nothing happens."
        done = success or self.moves >= self.step_budget
        return StepResult(self._observe(text, done=done, success=success), reward, done, success)

    def gold_path(self) -> list[str]:
        return ["take key", "open door"]

    def close(self) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def play(
    server: OpenAIStub, *, fallback: Any = "explorer", **options: Any
) -> tuple[Any, MemoryLLM, GraphMemory]:
    settings: dict[str, Any] = {"timeout": 5.0, **options}
    llm = MemoryLLM.from_openai(
        base_url=server.base_url, model="stub-model", api_key="sk-agent-test-key", **settings
    )
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64), llm=llm)
    policy = ChatPolicy(llm, fallback=Explorer() if fallback == "explorer" else fallback)
    result = run_stream(mem, "door", game="door", seeds=SEEDS, policy=policy, env=DoorGame())
    return result, llm, mem


def assert_usage_matches(llm: MemoryLLM, server: OpenAIStub) -> None:
    usage = llm.usage.snapshot()
    assert usage.calls == len(server.served) > 0
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        server.prompt_tokens,
        server.completion_tokens,
    )


def test_the_policy_plays_through_the_shared_client(stub: OpenAIStub) -> None:
    result, llm, _ = play(stub)
    assert result.successes == [True, True, True] and result.steps == [2, 2, 2]
    ops = stub.ops()
    assert ops.count("choose_action") == 6  # one request per step, nothing hidden
    assert {"extract_note_fields", "distill_script"} & set(ops)  # memory used the same client
    first = stub.requests[ops.index("choose_action")]["body"]
    enum = first["response_format"]["json_schema"]["schema"]["properties"]["action"]["enum"]
    assert enum == ["take key", "open door"]  # constrained to the valid actions
    assert first["max_tokens"] == 1024
    assert_usage_matches(llm, stub)
    assert llm.usage.fallbacks == 0


def test_the_chat_policy_is_shown_remembered_procedures_and_credits_the_followed_one(
    stub: OpenAIStub,
) -> None:
    from graphmem.models import MemoryKind, Procedure

    result, _, mem = play(stub)
    assert all(result.successes)
    prompts = [
        str(r["body"]["messages"]) for r in stub.requests if "choose_action" in str(r["body"])
    ]
    shown = [p for p in prompts if "Procedures that solved similar tasks" in p]
    assert not any("Procedures that solved" in p for p in prompts[:2])  # game 1: none yet
    assert shown and all("take key; open door" in p for p in shown)  # games 2 and 3
    procs = [
        m for m in mem.store.iter_nodes("door", kinds=[MemoryKind.PROCEDURE])
        if isinstance(m, Procedure)
    ]  # fmt: skip
    assert any(p.uses >= 1 and p.q_updates >= 1 for p in procs)  # the followed one was credited


@pytest.mark.parametrize("fault", ["http_500", "wrong_types", "ramble"])
def test_a_failing_policy_model_falls_back_to_rules(stub: OpenAIStub, fault: str) -> None:
    stub.always(fault, op="choose_action")
    result, llm, _ = play(stub, max_tokens=40)
    assert len(result.successes) == 3 and all(result.successes)  # the explorer solved them
    assert_usage_matches(llm, stub)
    if fault == "http_500":  # six failed requests in a row take the endpoint out of use
        assert stub.ops().count("choose_action") == 6 and llm.disabled is not None


def test_a_hanging_server_ends_in_bounded_time(stub: OpenAIStub) -> None:
    stub.always("hang")
    started = time.perf_counter()
    result, llm, mem = play(stub, timeout=0.3, retries=1)
    elapsed = time.perf_counter() - started
    assert len(result.successes) == 3 and all(result.successes)
    assert len(stub.requests) == 4  # then the endpoint was out of use for the rest
    assert elapsed < 4 * 0.3 + 8.0
    assert {m.created_by for m in mem.store.iter_nodes("door")} == {"fallback"}
    assert_usage_matches(llm, stub)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (None, "the model chose all 6 steps"),
        (
            "hang",
            "the model chose no step: the explorer took all 6 (4 disabled endpoint, 2 timeout)",
        ),
        ("wrong_types", "the model chose no step: the explorer took all 6 (6 invalid reply)"),
    ],
)
def test_the_policy_says_who_chose_each_step(
    stub: OpenAIStub, fault: str | None, said: str
) -> None:
    if fault is not None:
        stub.always(fault, op="choose_action")
    llm = MemoryLLM.from_openai(
        base_url=stub.base_url, model="stub-model", api_key="sk-agent", timeout=0.3, retries=1
    )
    # Abstention off: every game after the first replays the remembered route (with it on,
    # the third game is a probe that learns how the agent does alone).
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64), llm=llm)
    policy = ChatPolicy(llm, fallback=Explorer())
    procedures = PROCEDURE_RETRIEVAL.model_copy(update={"abstain": False})
    result = run_stream(
        mem, "door", game="door", seeds=SEEDS, policy=policy, env=DoorGame(), procedures=procedures
    )
    assert all(result.successes) and sum(result.steps) == 6
    assert policy.summary() == said


def test_a_refused_key_costs_one_request_for_the_whole_stream(stub: OpenAIStub) -> None:
    stub.always("http_401")
    result, llm, mem = play(stub)
    assert all(result.successes) and len(stub.requests) == 1
    assert llm.disabled is not None and "GRAPHMEM_LLM_API_KEY" in llm.disabled
    assert {m.created_by for m in mem.store.iter_nodes("door")} == {"fallback"}


def test_without_a_rule_fallback_a_failed_step_ends_only_that_game(stub: OpenAIStub) -> None:
    stub.queue("http_500", "http_500", "http_500", op="choose_action")  # game 0's first step
    result, llm, _ = play(stub, fallback=None)
    assert result.successes == [False, True, True]
    assert result.steps == [0, 2, 2]
    assert_usage_matches(llm, stub)


@pytest.mark.java
@pytest.mark.slow
def test_the_llm_cli_survives_a_dead_server_and_prints_usage(
    stub: OpenAIStub, tmp_path: Path
) -> None:
    pytest.importorskip("textworld_express")
    from showcase.envs import has_java17

    if not has_java17():
        pytest.skip("needs a Java 17 runtime")
    stub.always("http_500")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env |= {
        "GRAPHMEM_STORE": str(tmp_path / "store"),
        "GRAPHMEM_LLM_BASE_URL": stub.base_url,
        "GRAPHMEM_LLM_MODEL": "stub-model",
        "GRAPHMEM_EMBEDDER": "hashing",
    }
    cmd = [sys.executable, "-m", "showcase.textworld_agent", "--game", "cookingworld"]
    cmd += ["--seeds", "0-1", "--budget", "5", "--llm", "--in-memory", "--no-progress"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cookingworld: solved" in done.stdout
    assert "LLM usage (stub-model): " in done.stderr
    assert f"{len(stub.served)} requests ({len(stub.served)} failed)" in done.stderr
    assert "the model chose no step: the explorer took all" in done.stderr
