"""The LLM layer against a real OpenAI-compatible server on loopback (tests/openai_stub.py),
through the real ``ChatOpenAI``: constrained output, token caps, bounded time, honest usage,
permanent errors, one-line causes, all-or-nothing writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from openai_stub import OpenAIStub

from graphmem import GraphMemory, HashingEmbedder
from graphmem.errors import ConfigError, LLMError
from graphmem.llm import MemoryLLM, Neighbour, ops
from graphmem.models import EdgeKind, MemoryKind, Note, TrajectoryStep
from graphmem.settings import Settings
from graphmem.stores.embedded import EmbeddedStore

NOTE = "The spare key is under the blue flower pot by the back door."
KEY = "sk-test-graphmem-DUMMY-0123456789"


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def llm_for(server: OpenAIStub, **kwargs: Any) -> MemoryLLM:
    options: dict[str, Any] = {"timeout": 5.0, **kwargs}
    return MemoryLLM.from_openai(
        base_url=server.base_url, model="stub-model", api_key=KEY, **options
    )


def memory(llm: MemoryLLM) -> GraphMemory:
    return GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(64), llm=llm)


def assert_usage_matches(llm: MemoryLLM, server: OpenAIStub) -> None:
    usage = llm.usage.snapshot()
    assert usage.calls == len(server.served)
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        server.prompt_tokens,
        server.completion_tokens,
    )


# ---- constrained output --------------------------------------------------------------------


def test_a_prose_model_answers_through_the_schema_it_is_sent() -> None:
    with OpenAIStub(unconstrained="prose") as server:
        llm = llm_for(server)
        fields = llm.extract_note_fields(NOTE)
        assert fields.keywords[0] == "stubkey" and llm.usage.calls == 1
        assert server.constraint(0) == "json_schema"
        sent = server.requests[0]["body"]["response_format"]["json_schema"]
        assert sent["name"] == "extract_note_fields"
        assert set(sent["schema"]["required"]) == {"keywords", "context", "category"}
        assert "$defs" not in str(sent["schema"])  # inlined for small grammars

        # The same model asked without a constraint writes prose: every try fails, then rules.
        plain = llm_for(server, output="prompt")
        produced = ops.note_fields(plain, NOTE)
        assert produced.created_by == "fallback"
        assert [server.constraint(i) for i in range(1, 4)] == ["none"] * 3


@pytest.mark.parametrize(
    ("mode", "wire"),
    [
        ("json_schema", "json_schema"),
        ("tool", "tools"),
        ("json", "json_object"),
        ("prompt", "none"),
    ],
)
def test_each_output_mode_on_the_wire(stub: OpenAIStub, mode: str, wire: str) -> None:
    llm = llm_for(stub, output=mode)
    assert llm.extract_keywords("Put a clean apple in the fridge")[:2] == ["stubkey", "clean"]
    assert stub.constraint(0) == wire and llm.output_mode == mode
    if mode == "tool":
        assert stub.requests[0]["body"]["tool_choice"]["function"]["name"] == "extract_keywords"


def test_auto_steps_down_when_refused_with_a_500_naming_response_format() -> None:
    # llama-cpp-python's server answers response_format "json_schema" with a 500 (a validation
    # error naming response_format); that is a refusal of the mode, not a server failure.
    with OpenAIStub(supports=("tools",), refusal_status=500) as server:
        llm = llm_for(server)
        assert llm.extract_keywords("water the plants")[0] == "stubkey"
        assert [s["status"] for s in server.served] == [500, 200]
        assert llm.output_mode == "tool"
        assert_usage_matches(llm, server)
        assert llm.usage.failures == 0  # a refused mode is no failed request
        assert "failed" not in llm.usage.snapshot().summary()
        # Remembered per base URL: the next client (a new run's `llm check`) is not refused.
        again = llm_for(server)
        assert again.output_mode == "tool"
        again.extract_keywords("water the tomatoes")
        assert [s["status"] for s in server.served] == [500, 200, 200]


def test_auto_steps_down_to_what_the_server_takes() -> None:
    with OpenAIStub(supports=("tools",)) as server:
        llm = llm_for(server)
        assert llm.output_mode == "json_schema"
        assert llm.extract_keywords("water the plants")[0] == "stubkey"
        assert [server.constraint(i) for i in range(2)] == ["json_schema", "tools"]
        assert [s["status"] for s in server.served] == [400, 200]
        assert llm.output_mode == "tool"
        llm.extract_keywords("water the tomatoes")  # settled: no second refusal
        assert server.constraint(2) == "tools" and len(server.served) == 3
        assert_usage_matches(llm, server)
    with OpenAIStub(supports=()) as server:
        llm = llm_for(server)
        assert llm.extract_keywords("water the plants")[0] == "stubkey"
        assert [server.constraint(i) for i in range(4)] == [
            "json_schema",
            "tools",
            "json_object",
            "none",
        ]
        assert llm.output_mode == "prompt"


def test_invalid_output_is_retried_with_a_varied_request(stub: OpenAIStub) -> None:
    stub.queue("wrong_types", "valid")
    llm = llm_for(stub)
    llm.extract_keywords("water the plants")
    first, retry = (r["body"] for r in stub.requests)
    assert first["temperature"] == 0.0 and retry["temperature"] == pytest.approx(0.4)
    assert "Fix exactly that" in retry["messages"][-1]["content"]
    assert "keywords" in retry["messages"][-1]["content"]  # the error names the field


# ---- bounded generation and time -----------------------------------------------------------


def test_the_token_cap_is_sent_as_max_tokens(stub: OpenAIStub) -> None:
    llm_for(stub, max_tokens=64).extract_keywords("water the plants")
    body = stub.requests[0]["body"]
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    llm_for(stub, max_tokens=64, max_tokens_field="max_completion_tokens").extract_keywords("x y")
    body = stub.requests[1]["body"]
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body


def test_a_rambling_model_is_cut_at_the_cap_and_asked_for_less(stub: OpenAIStub) -> None:
    stub.queue("ramble", "valid")
    llm = llm_for(stub, max_tokens=50)
    assert llm.extract_keywords("water the plants")[0] == "stubkey"
    assert stub.served[0]["completion_tokens"] == 50  # the server stopped at the cap
    assert "too long" in stub.requests[1]["body"]["messages"][-1]["content"]
    assert_usage_matches(llm, stub)
    stub.always("ramble")
    with pytest.raises(LLMError, match="cut at 50 tokens"):
        llm_for(stub, max_tokens=50, fallback=False).extract_keywords("water the plants")


def test_a_hanging_server_costs_bounded_time(caplog: pytest.LogCaptureFixture) -> None:
    with OpenAIStub() as server:
        server.always("hang")
        llm = llm_for(server, timeout=0.5, retries=1)
        mem = memory(llm)
        started = time.perf_counter()
        note = mem.add_note("ns", NOTE, evolve=True)
        first = time.perf_counter() - started
        assert note.created_by == "fallback"
        assert first < 2 * 0.5 + 2.0  # two tries of 0.5 s, no hidden SDK retry
        assert len(server.requests) == 2
        assert "timeout" in (llm.first_error or "").lower()
        # After max_failures_in_a_row (4) the endpoint is out of use: no more waiting.
        for i in range(4):
            mem.add_note("ns", f"{NOTE} ({i})")
        assert len(server.requests) == 4 and llm.disabled is not None
        assert "GRAPHMEM_LLM_TIMEOUT" in llm.disabled


# ---- honest accounting ---------------------------------------------------------------------


def test_usage_is_what_the_server_served_across_build_update_evolve(stub: OpenAIStub) -> None:
    llm = llm_for(stub)
    mem = memory(llm)
    stub.queue("http_500", "invalid_json", "valid", "ramble", "wrong_types")
    steps = [{"action": a, "observation": "ok"} for a in ("open fridge", "take soup", "heat")]
    good = {"task": "heat the soup", "steps": steps, "reward": 1.0, "success": True}
    mem.build("ns", good, key_mode="keywords", granularity="proceduralized", evolve=True)
    mem.add_note("ns", NOTE, evolve=True)
    mem.add_note("ns", "The spare key of the back door is blue.", evolve=True)
    bad = {"task": "heat the soup", "steps": steps[:1], "reward": 0.0, "success": False}
    mem.update("ns", bad)
    assert {"extract_keywords", "distill_script", "extract_note_fields", "decide_links"} <= set(
        stub.ops()
    )
    assert {s["status"] for s in stub.served} == {200, 500}
    assert_usage_matches(llm, stub)
    assert llm.usage.failures == 4  # the 500, the bad JSON, the cut reply, the wrong types


def test_an_http_500_is_one_request_not_three(stub: OpenAIStub) -> None:
    stub.queue("http_500")
    llm = llm_for(stub)  # no max_retries given: the SDK must not retry behind our back
    llm.extract_keywords("water the plants")
    assert [s["status"] for s in stub.served] == [500, 200]
    assert llm.usage.calls == 2 and llm.usage.failures == 1


# ---- dead or misconfigured endpoints -------------------------------------------------------


def test_a_wrong_key_is_not_retried_and_named(stub: OpenAIStub) -> None:
    stub.always("http_401")
    llm = llm_for(stub)
    first = ops.task_keywords(llm, "water the plants")
    assert first.created_by == "fallback" and len(stub.requests) == 1
    assert llm.disabled is not None and "GRAPHMEM_LLM_API_KEY" in llm.disabled
    ops.note_fields(llm, NOTE)  # the endpoint is out of use: no request, same reason
    assert len(stub.requests) == 1
    strict = llm_for(stub, fallback=False)
    with pytest.raises(LLMError) as info:
        strict.extract_keywords("water the plants")
    message = str(info.value)
    assert "\n" not in message and "401" in message and "GRAPHMEM_LLM_API_KEY" in message
    assert KEY not in message


def test_a_base_url_without_v1_says_so(stub: OpenAIStub) -> None:
    url = stub.base_url.removesuffix("/v1")
    llm = MemoryLLM.from_openai(base_url=url, model="m", api_key=KEY, fallback=False)
    with pytest.raises(LLMError) as info:
        llm.extract_keywords("water the plants")
    assert len(stub.requests) == 1
    assert f"the base URL {url} does not end in /v1" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_spent_budget_keeps_the_first_real_error(stub: OpenAIStub) -> None:
    from graphmem.llm import CallBudget

    stub.always("http_500")
    llm = llm_for(stub, fallback=False, retries=5)
    with pytest.raises(LLMError) as info:
        llm.extract_keywords("water the plants", budget=CallBudget(2))
    assert "budget of 2" in str(info.value) and "first error" in str(info.value)
    assert "Error code: 500" in str(info.value)


def test_graphmem_llm_check(stub: OpenAIStub) -> None:
    env = {**os.environ, "GRAPHMEM_LLM_BASE_URL": stub.base_url, "GRAPHMEM_LLM_MODEL": "m"}
    env["GRAPHMEM_LLM_API_KEY"] = KEY
    cmd = [sys.executable, "-m", "graphmem", "llm", "check"]
    ok = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "ok in" in ok.stdout and "output mode json_schema" in ok.stdout
    assert "LLM usage: 1 requests" in ok.stdout
    stub.always("http_401")
    bad = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.startswith("graphmem: error: ") and bad.stderr.count("\n") == 1
    assert "GRAPHMEM_LLM_API_KEY" in bad.stderr and KEY not in bad.stderr + bad.stdout


# ---- settings ------------------------------------------------------------------------------


def test_settings_carry_the_limits_to_the_request(stub: OpenAIStub) -> None:
    env = {
        "GRAPHMEM_LLM_BASE_URL": stub.base_url,
        "GRAPHMEM_LLM_OUTPUT": "tool",
        "GRAPHMEM_LLM_MAX_TOKENS": "77",
        "GRAPHMEM_LLM_TIMEOUT": "4.5",
        "GRAPHMEM_LLM_RETRIES": "0",
    }
    llm = Settings.from_env(env).make_llm()
    assert llm is not None and llm.retries == 0 and llm.output == "tool"
    assert getattr(llm.chat_model, "request_timeout", None) == 4.5
    stub.always("http_500")
    ops.task_keywords(llm, "water the plants")
    assert len(stub.requests) == 1  # retries=0
    body = stub.requests[0]["body"]
    assert body["max_tokens"] == 77 and stub.constraint(0) == "tools"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("GRAPHMEM_LLM_OUTPUT", "xml", "json_schema, tool, json, prompt, auto"),
        ("GRAPHMEM_LLM_MAX_TOKENS", "lots", "GRAPHMEM_LLM_MAX_TOKENS must be a number"),
        ("GRAPHMEM_LLM_TIMEOUT", "0", "GRAPHMEM_LLM_TIMEOUT must be a number >= 0.001"),
        ("GRAPHMEM_LLM_RETRIES", "-1", "GRAPHMEM_LLM_RETRIES must be a number >= 0"),
        ("GRAPHMEM_LLM_MAX_TOKENS_FIELD", "n_predict", "max_completion_tokens"),
    ],
)
def test_bad_llm_settings_are_one_clear_line(name: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Settings.from_env({name: value})


# ---- content, provenance, all or nothing ---------------------------------------------------


def test_duplicate_decisions_never_fork_a_neighbour(stub: OpenAIStub) -> None:
    llm = llm_for(stub)
    mem = memory(llm)
    old = mem.add_note("ns", NOTE)
    n = len(stub.requests)
    mem.add_note("ns", "The spare key under the blue pot opens the back door.", evolve=True)
    assert stub.ops()[n:] == ["extract_note_fields", "decide_links"]
    live = [m for m in mem.store.iter_nodes("ns", kinds=[MemoryKind.NOTE]) if not m.obsolete]
    assert len(live) == 2 and old.id not in {m.id for m in live}  # one new version, not two
    # What a model listing one id twice means, at the schema level:
    twice = {"links": [], "updates": [{"id": "a", "context": "x"}, {"id": "a", "context": "y"}]}
    from graphmem.llm import LinkDecisions

    assert [u.context for u in LinkDecisions.model_validate(twice).updates] == ["x"]


def test_the_model_judges_a_newer_fact_the_rules_cannot_see(stub: OpenAIStub) -> None:
    mem = memory(llm_for(stub))
    # Nothing capitalised and no "I": the offline rule finds no shared subject.
    old = mem.add_note("ns", "the office is in the old town hall", valid_at="2024-03-01")
    assert not any(e.kind is EdgeKind.UPDATES for e in mem.store.iter_edges("ns"))
    new = mem.add_note(
        "ns", "the office is in the harbour building since may", evolve=True, valid_at="2024-06-01"
    )
    edges = [e for e in mem.store.iter_edges("ns") if e.kind is EdgeKind.UPDATES]
    # The stub also refreshes the neighbour's context: a new version holds the fact now.
    notes = mem.store.iter_nodes("ns", kinds=[MemoryKind.NOTE])
    kept = [m for m in notes if m.id != new.id and not m.obsolete]
    assert len(edges) == 1 and edges[0].src == new.id and edges[0].props["source"] != "rules"
    assert [m.updated_by for m in kept] == [new.id] and kept[0].id == edges[0].dst
    assert old.content in {m.content for m in kept if isinstance(m, Note)}
    hits = mem.retrieve("ns", "where is the office", kinds=("Note",), lam=0.0).hits
    assert hits[0].memory.id == new.id


def test_placeholders_and_one_word_tips_are_not_accepted(stub: OpenAIStub) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    replies = [
        '{"keywords": ["..."]}',
        '{"tip": "avoid", "polarity": "avoid"}',
        '{"tip": "Check the fridge first.", "polarity": "avoid", "failed_step": 9}',
    ]
    llm = MemoryLLM(FakeListChatModel(responses=replies), retries=0, fallback=True)
    assert ops.task_keywords(llm, "water the plants").created_by == "fallback"
    failed = [TrajectoryStep(action="open oven")]
    assert ops.reflect(llm, "heat soup", failed).created_by == "fallback"  # one word
    assert ops.reflect(llm, "heat soup", failed).created_by == "fallback"  # no step 9
    assert llm.usage.failures == 3


def test_add_note_with_evolve_is_all_or_nothing_without_fallback(stub: OpenAIStub) -> None:
    llm = llm_for(stub, fallback=False)
    mem = memory(llm)
    mem.add_note("ns", NOTE)
    before = sorted(m.id for m in mem.store.iter_nodes("ns"))
    stub.always("wrong_types", op="decide_links")
    with pytest.raises(LLMError, match="decide_links"):
        mem.add_note("ns", "The spare key of the back door is blue.", evolve=True)
    assert sorted(m.id for m in mem.store.iter_nodes("ns")) == before


def test_created_by_names_who_wrote_the_content(stub: OpenAIStub) -> None:
    llm = llm_for(stub)
    mem = memory(llm)
    assert mem.add_note("ns", NOTE).created_by == "stub-model"
    stub.always("wrong_types", op="extract_note_fields")
    assert mem.add_note("ns", "Another note about keys.").created_by == "fallback"
    neighbours = [Neighbour(id="n1", text="keys", sim=0.9)]
    stub.always("http_500", op="decide_links")
    assert ops.decide_links(llm, "m", neighbours).created_by == "fallback"
