"""Every LLM request is bounded end to end, whatever the server does (tests/openai_stub.py).

Each fault gets a stand-in server: one that drips a byte at a time after its headers, one that
ignores ``max_tokens`` and sends 100k tokens at once, one whose replies are cut at the cap (as a
forced tool call and as text under a schema), and one that keeps generating after the client
has given up. The time each costs is held against the configured deadline: at most 10 % over it
per request (plus a fixed allowance for a loaded machine), so an unbounded request fails.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from openai_stub import OpenAIStub

from graphmem.errors import LLMError
from graphmem.llm import MemoryLLM, ops, parse_json_object
from graphmem.llm.client import InvalidOutput

DEADLINE = 1.5
SLACK = 1.5
"""Seconds allowed on top of 10 % of the deadlines: Python, the SDK and a busy two-core box
(0.4 s failed once at 4.69 s for two 1.5 s requests on a box running two test suites at once).
Every fault bounded here runs unbounded for 30 s or more, far beyond this."""
KEY = "sk-test-bounds-0123456789"


def llm_for(server: OpenAIStub, **kwargs: Any) -> MemoryLLM:
    options: dict[str, Any] = {"timeout": DEADLINE, "retries": 1, **kwargs}
    return MemoryLLM.from_openai(base_url=server.base_url, model="stub", api_key=KEY, **options)


def assert_bounded(elapsed: float, requests: int) -> None:
    assert elapsed <= requests * DEADLINE * 1.1 + SLACK, f"{elapsed:.2f} s for {requests} requests"


def test_a_server_dripping_bytes_is_cut_off_at_the_deadline() -> None:
    # Headers at once, then one byte every 0.3 s: each read is quick, the request never ends.
    with OpenAIStub(drip_seconds=0.3) as server:
        server.always("drip")
        llm = llm_for(server)
        started = time.monotonic()
        produced = ops.task_keywords(llm, "water the plants")
        elapsed = time.monotonic() - started
        assert produced.created_by == "fallback"
        assert len(server.requests) == 2
        assert elapsed >= 2 * DEADLINE * 0.9  # the deadline, not something shorter, ended them
        assert_bounded(elapsed, 2)
        usage = llm.usage.snapshot()
        assert (usage.calls, usage.failures, usage.uncounted) == (2, 2, 2)
        assert "tokens of 2 not reported" in usage.summary()


@pytest.mark.parametrize("max_tokens", [1024, None])
def test_a_100k_token_reply_is_refused_unparsed(
    max_tokens: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    # The server ignores max_tokens (or there is none): 100k tokens in milliseconds.
    with OpenAIStub() as server:
        server.always("huge")
        llm = llm_for(server, max_tokens=max_tokens, fallback=False)
        started = time.monotonic()
        with pytest.raises(LLMError, match="over") as raised:
            llm.extract_keywords("water the plants")
        assert_bounded(time.monotonic() - started, 1)  # far under: refused, never parsed
        assert "\n" not in str(raised.value)
        assert len(server.requests) == 2  # once more, asked for less; then no more
        assert llm.usage.uncounted == (2 if max_tokens else 0)  # cut off unread, or counted


def test_a_long_reply_from_any_chat_model_is_refused_before_parsing() -> None:
    huge = '{"keywords": ["' + "{la " * 100_000  # braces everywhere, never closed
    llm = MemoryLLM(FakeListChatModel(responses=[huge, huge]), max_tokens=256, retries=1)
    with pytest.raises(LLMError, match="characters, over the bound"):
        llm.extract_keywords("water the plants")
    with pytest.raises(InvalidOutput):  # and the parser itself is linear: one pass, no repair
        parse_json_object(huge)


@pytest.mark.parametrize(("mode", "fault"), [("tool", "cut_tool"), ("json_schema", "ramble")])
def test_a_cut_reply_is_asked_for_once_more_shorter_then_left_to_the_fallback(
    mode: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # In tool mode llama-cpp-python returns a cut call as an ordinary one ("tool_calls"): the
    # cap reached is what says it was cut.
    with OpenAIStub() as server:
        server.always(fault)
        llm = llm_for(server, output=mode, max_tokens=40, retries=2)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="graphmem"):
            produced = ops.task_keywords(llm, "water the plants")
        assert_bounded(time.monotonic() - started, 2)
        assert produced.created_by == "fallback"
        assert len(server.requests) == 2  # not three copies of the same cut reply
        assert "too long" in server.requests[1]["body"]["messages"][-1]["content"]
        assert "cut at 40 tokens" in caplog.text
        assert "holds no JSON object" not in caplog.text
        usage = llm.usage.snapshot()
        assert (usage.calls, usage.uncounted) == (2, 0)
        assert (usage.prompt_tokens, usage.completion_tokens) == (
            server.prompt_tokens,
            server.completion_tokens,
        )


def test_a_timed_out_request_is_closed_so_the_server_stops_generating() -> None:
    # One slot, like llama.cpp: a generation the client gave up on would hold the slot, and
    # the retry would queue behind it. Closing the connection at the deadline frees it.
    with OpenAIStub(generate_seconds=30.0) as server:
        server.always("generate")
        llm = llm_for(server)
        started = time.monotonic()
        produced = ops.task_keywords(llm, "water the plants")
        assert_bounded(time.monotonic() - started, 2)
        assert produced.created_by == "fallback"
        until = time.monotonic() + 5
        while len(server.generations) < 2 and time.monotonic() < until:
            time.sleep(0.05)
        assert len(server.generations) == 2
        for waited, generated, finished in server.generations:
            assert not finished  # stopped when the client hung up
            assert generated <= DEADLINE * 1.1 + SLACK
            assert waited <= SLACK  # the retry did not queue behind the first generation
        assert llm.usage.uncounted == 2
