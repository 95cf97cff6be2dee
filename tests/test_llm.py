"""The LLM layer: the real ChatOpenAI path against a local OpenAI-compatible server, retries,
budgets, usage, fallbacks, and secrets kept out of errors and logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from openai_stub import OpenAIStub

from graphmem import GraphMemory, HashingEmbedder
from graphmem.errors import LLMError
from graphmem.keywords import STOP_WORDS, extract_keywords
from graphmem.llm import (
    CallBudget,
    MemoryLLM,
    Neighbour,
    NoteFields,
    fallbacks,
    ops,
    parse_json_object,
)
from graphmem.llm.client import InvalidOutput
from graphmem.models import TrajectoryStep
from graphmem.stores.base import MemoryStore

API_KEY = "sk-test-graphmem-DUMMY-0123456789"
NOTE = "The spare key is under the blue flower pot by the back door."
MALFORMED = ("invalid_json", "missing_fields", "wrong_types", "http_500", "empty")


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


def make_llm(stub: OpenAIStub, *, fallback: bool = True, **kwargs: Any) -> MemoryLLM:
    # max_retries=0: the HTTP client must not retry 500s itself, so each attempt is ours.
    return MemoryLLM.from_openai(
        base_url=stub.base_url,
        model="stub-model",
        api_key=API_KEY,
        max_retries=0,
        timeout=10,
        fallback=fallback,
        **kwargs,
    )


def steps(*actions: str) -> list[TrajectoryStep]:
    return [TrajectoryStep(action=a, observation=f"did {a}") for a in actions]


# ---- the valid path ----------------------------------------------------------------------


def test_valid_reply_fields_are_used_and_usage_counted(stub: OpenAIStub) -> None:
    llm = make_llm(stub)
    fields = llm.extract_note_fields(NOTE)
    assert fields.keywords[0] == "stubkey"
    assert "spare" in fields.keywords
    assert fields.tags == ["stubtag"]
    assert fields.category == "stubcat"
    assert fields.context.startswith("Stub context")
    usage = llm.usage.snapshot()
    assert usage.calls == 1
    assert usage.failures == 0
    assert (usage.prompt_tokens, usage.completion_tokens) == stub.usage[0]
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    # The real ChatOpenAI path: the key went in the header, the model in the body.
    request = stub.requests[0]
    assert request["authorization"] == f"Bearer {API_KEY}"
    assert request["body"]["model"] == "stub-model"
    assert request["op"] == "extract_note_fields"


def test_every_operation_on_the_chat_openai_path(stub: OpenAIStub) -> None:
    llm = make_llm(stub)
    assert llm.extract_keywords("Put a clean apple in the fridge")[:2] == ["stubkey", "clean"]
    script = llm.distill_script("heat soup", steps("open fridge", "take soup"), True)
    assert script.steps == ["stub: open fridge", "stub: take soup"]
    assert script.text() == "1. stub: open fridge\n2. stub: take soup"
    tip = llm.reflect("heat soup", steps("open oven"), steps("open fridge"))
    assert tip.polarity == "avoid" and tip.tip.startswith("stub tip")
    neighbours = [
        Neighbour(id="n1", text="soup recipe", sim=0.8),
        Neighbour(id="n2", text="fridge layout", sim=0.6),
    ]
    links = llm.decide_links("heat the soup on the stove", neighbours)
    assert [(c.id, c.strength) for c in links.links] == [("n1", 0.9)]
    assert links.updates[0].context.startswith("stub refreshed context about")
    assert stub.ops() == ["extract_keywords", "distill_script", "reflect", "decide_links"]
    assert llm.usage.calls == 4
    assert llm.usage.prompt_tokens == sum(p for p, _ in stub.usage)
    assert llm.usage.completion_tokens == sum(c for _, c in stub.usage)


def test_fenced_reply_with_chatter_is_parsed(stub: OpenAIStub) -> None:
    stub.queue("fenced")
    llm = make_llm(stub)
    assert llm.extract_keywords("water the plants")[0] == "stubkey"
    assert llm.usage.failures == 0


def test_json_mode_asks_the_server_for_json_objects(stub: OpenAIStub) -> None:
    make_llm(stub, json_mode=True).extract_keywords("water the plants")
    sent = stub.requests[0]["body"]["response_format"]
    # JSON mode, with the schema beside it (llama-cpp-python's server enforces it this way).
    assert sent["type"] == "json_object" and sent["schema"]["required"] == ["keywords"]
    make_llm(stub, output="prompt").extract_keywords("water the plants")
    assert "response_format" not in stub.requests[1]["body"]


# ---- retries, budgets, failure -----------------------------------------------------------


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_then_valid_is_retried(stub: OpenAIStub, bad: str) -> None:
    stub.queue(bad, "valid")
    llm = make_llm(stub)
    fields = llm.extract_note_fields(NOTE)
    assert fields.keywords[0] == "stubkey"
    assert [r["behaviour"] for r in stub.requests] == [bad, "valid"]
    assert llm.usage.calls == 2
    assert llm.usage.failures == 1


def test_retry_tells_the_model_what_was_wrong(stub: OpenAIStub) -> None:
    stub.queue("wrong_types", "valid")
    make_llm(stub).extract_keywords("water the plants")
    retry_messages = stub.requests[1]["body"]["messages"]
    assert [m["role"] for m in retry_messages] == ["system", "user", "assistant", "user"]
    assert "not valid" in retry_messages[-1]["content"]


@pytest.mark.parametrize("bad", MALFORMED)
def test_always_malformed_raises_without_fallback(stub: OpenAIStub, bad: str) -> None:
    stub.always(bad)
    llm = make_llm(stub, fallback=False)
    with pytest.raises(LLMError, match="extract_note_fields via stub-model"):
        ops.note_fields(llm, NOTE)
    assert len(stub.requests) == llm.retries + 1 == 3
    assert llm.usage.failures == 3
    assert llm.usage.fallbacks == 0


@pytest.mark.parametrize("bad", MALFORMED)
def test_always_malformed_uses_the_fallback_when_allowed(stub: OpenAIStub, bad: str) -> None:
    stub.always(bad)
    llm = make_llm(stub, fallback=True)
    produced = ops.note_fields(llm, NOTE)
    assert produced.created_by == "fallback"
    assert produced.value == fallbacks.note_fields(NOTE)
    assert llm.usage.fallbacks == 1
    assert len(stub.requests) == 3


def test_budget_caps_requests_across_an_operation(stub: OpenAIStub) -> None:
    stub.always("invalid_json")
    llm = make_llm(stub, fallback=False, retries=5)
    budget = CallBudget(2)
    with pytest.raises(LLMError, match="budget"):
        llm.extract_keywords("water the plants", budget=budget)
    assert len(stub.requests) == 2
    stub.clear()
    with pytest.raises(LLMError, match="budget"):
        llm.extract_keywords("water the plants", budget=budget)  # spent: no request at all
    assert len(stub.requests) == 2


def test_zero_budget_goes_straight_to_the_fallback(stub: OpenAIStub) -> None:
    llm = make_llm(stub)
    produced = ops.task_keywords(llm, "Put a clean apple in the fridge", CallBudget(0))
    assert produced.created_by == "fallback"
    assert produced.value == fallbacks.task_keywords("Put a clean apple in the fridge")
    assert stub.requests == []


def test_failed_build_without_fallback_writes_nothing(
    stub: OpenAIStub, store: MemoryStore, namespace: str
) -> None:
    ns = namespace
    llm = make_llm(stub, fallback=False)
    mem = GraphMemory(store, embedder=HashingEmbedder(384), llm=llm)
    mem.build(ns, {"task": "water the plants", "steps": [{"action": "fill can"}]})
    before_nodes = [m.model_dump() for m in store.iter_nodes(ns)]
    before_edges = [e.model_dump() for e in store.iter_edges(ns)]
    # Keywords succeed, the script keeps failing: nothing of this build may be written.
    stub.always("wrong_types", op="distill_script")
    trajectory = {
        "task": "water the tomatoes",
        "steps": [{"action": "fill can"}, {"action": "walk to tomatoes"}, {"action": "pour"}],
        "reward": 1.0,
        "success": True,
    }
    with pytest.raises(LLMError):
        mem.build(ns, trajectory, key_mode="keywords", granularity="proceduralized")
    assert "extract_keywords" in stub.ops()
    assert [m.model_dump() for m in store.iter_nodes(ns)] == before_nodes
    assert [e.model_dump() for e in store.iter_edges(ns)] == before_edges
    stub.always("http_500")
    with pytest.raises(LLMError):
        mem.add_note(ns, "A new note about the red flower pot.")
    assert [m.model_dump() for m in store.iter_nodes(ns)] == before_nodes


# ---- secrets -----------------------------------------------------------------------------


def test_api_key_never_appears_in_errors_or_logs(
    stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    llm = make_llm(stub, fallback=False)
    assert API_KEY not in repr(llm)
    stub.always("http_500")
    with pytest.raises(LLMError) as info:
        llm.extract_keywords("water the plants")
    chain: list[BaseException] = []
    error: BaseException | None = info.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert all(API_KEY not in str(e) and API_KEY not in repr(e) for e in chain)
    assert API_KEY not in caplog.text
    assert "request failed" in caplog.text  # the failures were logged, just not the key


def test_secret_echoed_by_a_provider_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    class Leaky(FakeListChatModel):
        def invoke(self, *args: Any, **kwargs: Any) -> AIMessage:
            raise RuntimeError(f"invalid api key {API_KEY}")

    caplog.set_level(logging.DEBUG)
    llm = MemoryLLM(Leaky(responses=["{}"]), fallback=False, secrets=[API_KEY])
    with pytest.raises(LLMError) as info:
        llm.extract_keywords("water the plants")
    assert "***" in str(info.value)
    assert API_KEY not in str(info.value)
    assert API_KEY not in caplog.text


def test_a_short_key_is_masked_as_a_whole_token_only(caplog: pytest.LogCaptureFixture) -> None:
    """A short API key ("en") is masked where it stands alone, not inside every word that
    holds its letters ("OpenAIConnectionError" stays readable)."""

    class Leaky(FakeListChatModel):
        def invoke(self, *args: Any, **kwargs: Any) -> AIMessage:
            raise RuntimeError("OpenAIConnectionError: key en was refused")

    llm = MemoryLLM(Leaky(responses=["{}"]), fallback=False, secrets=["en"])
    with pytest.raises(LLMError) as info:
        llm.extract_keywords("water the plants")
    assert "OpenAIConnectionError" in str(info.value)
    assert "key *** was refused" in str(info.value) and " en " not in str(info.value)


def test_a_password_in_a_uri_query_is_never_shown() -> None:
    from graphmem.errors import ConfigError
    from graphmem.stores.neo4j import Neo4jStore

    with pytest.raises(ConfigError) as info:
        Neo4jStore.from_uri("bolt://127.0.0.1:1/?password=s3cret&x=1", "neo4j", "pw")
    assert "s3cret" not in str(info.value) and "password=***" in str(info.value)


# ---- the one path: ops.with_fallback -----------------------------------------------------


def test_no_model_means_fallback_for_every_operation() -> None:
    failed, good = steps("open oven", "look"), steps("open fridge", "take soup")
    assert ops.note_fields(None, NOTE).created_by == "fallback"
    assert ops.task_keywords(None, "water the plants").value == ["water", "plants"]
    assert ops.distill_script(None, "t", good, True).value == fallbacks.script("t", good, True)
    assert ops.reflect(None, "t", failed, good).value == fallbacks.reflect("t", failed, good)
    neighbour = Neighbour(id="n1", text="x", sim=0.9)
    assert ops.decide_links(None, "y", [neighbour]).value.links[0].id == "n1"


def test_model_answers_carry_the_model_name() -> None:
    llm = MemoryLLM(FakeListChatModel(responses=['{"keywords": ["Fridge", "fridge", " apple "]}']))
    produced = ops.task_keywords(llm, "Put the apple in the fridge")
    assert produced.value == ["fridge", "apple"]  # normalised: lower-cased, de-duplicated
    assert produced.created_by == llm.name
    assert produced.by_model


def test_invented_neighbour_ids_are_retried_then_dropped() -> None:
    ghost = '{"id": "ghost", "reason": "both about keys", "strength": 0.5}'
    real = '{"id": "n1", "reason": "both about keys", "strength": 0.5}'
    replies = [f'{{"links": [{ghost}]}}', f'{{"links": [{ghost}, {real}, {real}]}}']
    llm = MemoryLLM(FakeListChatModel(responses=replies))
    out = llm.decide_links("the keys", [Neighbour(id="n1", text="keys here", sim=0.9)])
    # Only invented ids: invalid, retried. Some real ones: the rest dropped, duplicates too.
    assert [c.id for c in out.links] == ["n1"] and out.updates == []
    assert llm.usage.calls == 2 and llm.usage.failures == 1


def test_constructor_rejects_negative_retries() -> None:
    with pytest.raises(ValueError):
        MemoryLLM(FakeListChatModel(responses=["{}"]), retries=-1)


# ---- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '```json\n{"a": 1}\n```',
        'Here you go: {"a": 1} hope it helps {"b": 2}',
        '<think>{"no": 0} maybe</think>\n{"a": 1}',
        '```\n{"a": 1}\n```',
        '[1, 2] then {"a": 1}',
    ],
)
def test_parse_json_object_finds_the_object(text: str) -> None:
    assert parse_json_object(text) == {"a": 1}


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2, 3]", '{"a": 1', "```json\n```"])
def test_parse_json_object_rejects_non_objects(text: str) -> None:
    with pytest.raises(InvalidOutput):
        parse_json_object(text)


# ---- the deterministic fallbacks ---------------------------------------------------------


def test_fallback_note_fields_are_stable_and_complete() -> None:
    a, b = fallbacks.note_fields(NOTE), fallbacks.note_fields(NOTE)
    assert a == b
    assert isinstance(a, NoteFields)
    assert a.keywords[:3] == ["spare", "key", "blue"]
    assert a.context == NOTE
    assert a.category == "fact"
    assert a.tags[0] == "fact"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Never put metal in the microwave; it failed last time.", "lesson"),
        ("Alice prefers tea over coffee.", "preference"),
        ("First open the fridge, then take the milk.", "procedure"),
        ("1. open the fridge\n2. take the milk", "procedure"),
        ("Where is the spare key?", "question"),
        ("The spare key is in the drawer.", "fact"),
    ],
)
def test_fallback_category(text: str, category: str) -> None:
    assert fallbacks.category(text) == category


def test_fallback_context_is_one_bounded_sentence() -> None:
    assert fallbacks.one_sentence("First sentence here. Second one.") == "First sentence here."
    long = "word " * 200
    out = fallbacks.one_sentence(long)
    assert len(out) <= fallbacks.MAX_CONTEXT_CHARS + 1 and out.endswith("…")


def test_fallback_script_is_numbered_parameterised_and_deduplicated() -> None:
    trajectory = steps(
        "go to cabinet 1", "go to cabinet 2", "go to cabinet 3", "take mug 2", 'say "hello there"'
    )
    script = fallbacks.script("find a mug", trajectory, success=True)
    assert script.text().splitlines() == [
        "1. go to cabinet <n> (repeat as needed)",
        "2. take mug <n>",
        "3. say <text>",
    ]
    failed = fallbacks.script("find a mug", trajectory, success=False)
    assert "did not complete" in failed.text() and "say" in failed.notes


def test_fallback_reflection_finds_the_first_divergence() -> None:
    failed = steps("go to counter", "take knife", "go to fridge", "open fridge")
    good = steps("go to counter", "take knife", "go to sink", "clean knife")
    tip = fallbacks.reflect("clean the knife", failed, good)
    assert tip.polarity == "prefer"
    assert tip.failed_step == 2
    assert "go to sink" in tip.tip and "go to fridge" in tip.tip
    assert tip.corrected_steps == [s.action for s in good]


def test_fallback_reflection_without_a_success() -> None:
    failed = steps("go to counter", "take knife", "open drawer")
    tip = fallbacks.reflect("clean the knife", failed)
    assert (tip.polarity, tip.failed_step) == ("avoid", 2)
    assert "open drawer" in tip.tip and "did open drawer" in tip.tip
    looping = steps("look", "look", "look", "look", "go north")
    stuck = fallbacks.reflect("find the key", looping)
    assert "repeating 'look'" in stuck.tip and stuck.failed_step == 0


def test_a_model_rating_a_link_outside_zero_to_one_is_clamped_not_refused() -> None:
    from pydantic import ValidationError

    from graphmem.llm.schemas import LinkChoice

    assert LinkChoice(id="a", reason="same key", strength=1.5).strength == 1.0
    assert LinkChoice(id="a", reason="same key", strength=-2).strength == 0.0
    assert LinkChoice.model_json_schema()["properties"]["strength"]["maximum"] == 1.0
    for bad in (float("nan"), "high", None):
        with pytest.raises(ValidationError):
            LinkChoice(id="a", reason="same key", strength=bad)


def test_fallback_links_follow_the_similarity_threshold() -> None:
    neighbours = [
        Neighbour(id="a", text="x", sim=0.91),
        Neighbour(id="b", text="y", sim=0.49),
        Neighbour(id="c", text="z", sim=1.0000002),
    ]
    out = fallbacks.decide_links("m", neighbours, threshold=0.5)
    assert [(c.id, c.strength) for c in out.links] == [("a", 0.91), ("c", 1.0)]
    assert out.updates == []


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_keywords_are_stable_content_words(text: str) -> None:
    words = extract_keywords(text)
    assert words == extract_keywords(text)
    assert len(words) == len(set(words)) <= 8
    assert all(w not in STOP_WORDS and len(w) > 1 and w == w.lower() for w in words)
    assert all(w in text.lower() for w in words)
