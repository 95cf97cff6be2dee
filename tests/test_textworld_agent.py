"""The TextWorldExpress example agent: with graphmem memory it solves more of a fixed task stream
than the same agent without memory. Needs Java 17 (marker ``java``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from graphmem.embedding import HashingEmbedder
from graphmem.memory import GraphMemory
from graphmem.models import MemoryKind, Note
from graphmem.stores.embedded import EmbeddedStore
from showcase.textworld_agent import (
    ChatPolicy,
    choose_action,
    fact_lines,
    learn_facts_by_subject,
    run_stream,
)

GAME = "twc"
SEEDS = range(30)
MARGIN = 0.2
"""Success-rate points memory must add over the no-memory agent on :data:`SEEDS`."""


def _java_or_skip() -> Any:
    pytest.importorskip("textworld_express")
    from showcase.envs import TextWorldEnv, has_java17

    if not has_java17():
        pytest.skip("needs a Java 17 runtime")
    return TextWorldEnv


def test_choose_action_matches_a_valid_action() -> None:
    valid: Sequence[str] = ["open fridge", "take red apple", "take red apple from fridge"]
    assert choose_action("take red apple", valid) == "take red apple"
    assert choose_action("> Take Red Apple.", valid) == "take red apple"
    assert choose_action("I will take red apple from fridge now", valid) == (
        "take red apple from fridge"
    )
    assert choose_action("opn the fridg", valid) == "open fridge"
    assert choose_action("anything", []) == "look around"


def _game(*steps: tuple[str, str, float]) -> Any:
    return {
        "task": "twc tidy up",
        "steps": [{"action": a, "observation": o, "reward": r, "thought": ""} for a, o, r in steps],
    }


def test_facts_are_consolidated_one_live_note_per_subject() -> None:
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
    ns = "facts"
    first = learn_facts_by_subject(
        mem,
        ns,
        _game(
            ("put hat in bed", "Wrong place.", -1.0),
            ("put hat in hat rack", "You put the hat on the hat rack.", 1.0),
            ("put mug in sink", "Wrong place.", -1.0),
        ),
    )
    assert len(first) == 2
    second = learn_facts_by_subject(
        mem,
        ns,
        _game(
            ("put mug in cupboard", "You put the mug in the cupboard.", 1.0),
            ("put hat in hat rack", "Wrong place.", -1.0),
        ),
    )
    live = [m for m in mem.store.iter_nodes(ns, [MemoryKind.NOTE]) if not m.obsolete]
    facts = {m.content.split("\n", 1)[0]: fact_lines(m) for m in live if fact_lines(m)}
    assert sorted(facts) == ["Facts about hat:", "Facts about mug:"], "one live note per subject"
    assert facts["Facts about mug:"] == [
        "mug belongs in cupboard",
        "mug does not belong in sink",
    ]
    assert facts["Facts about hat:"] == [
        "hat does not belong in bed",
        "hat does not belong in hat rack",
    ], "a contradicted fact gives way to the newer one"
    assert {m.id for m in live} == set(second)
    for old in first:
        assert mem.get(ns, old).obsolete, "the earlier notes evolved into new versions"


@pytest.mark.java
@pytest.mark.slow
def test_memory_beats_no_memory_on_a_task_stream() -> None:
    env_class = _java_or_skip()
    with env_class(GAME, step_budget=40) as env:
        baseline_mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
        baseline = run_stream(
            baseline_mem, "tw-baseline", game=GAME, seeds=SEEDS, use_memory=False, env=env
        )
        mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
        learned = run_stream(mem, "tw-memory", game=GAME, seeds=SEEDS, use_memory=True, env=env)
    print(
        f"\n{GAME} seeds {SEEDS.start}-{SEEDS.stop - 1}: without memory "
        f"{sum(baseline.successes)}/{len(SEEDS)} ({baseline.success_rate:.2f}), with memory "
        f"{sum(learned.successes)}/{len(SEEDS)} ({learned.success_rate:.2f})"
    )
    assert list(baseline_mem.store.iter_nodes("tw-baseline")) == []
    facts = [
        m for m in mem.store.iter_nodes("tw-memory", kinds=[MemoryKind.NOTE]) if isinstance(m, Note)
    ]
    assert facts, "the agent saved what the games taught it"
    assert learned.success_rate >= baseline.success_rate + MARGIN


@pytest.mark.java
def test_chat_policy_plays_through_the_flow() -> None:
    env_class = _java_or_skip()
    model = FakeListChatModel(responses=["look around", "inventory", "Action: open fridge"])
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
    with env_class(GAME, step_budget=3) as env:
        result = run_stream(
            mem, "tw-llm", game=GAME, seeds=[0], policy=ChatPolicy(model), env=env, use_memory=True
        )
    assert result.steps == [3] and result.successes == [False]
