"""``graphmem llm check``: ask the configured endpoint one question the way graphmem does.

It catches a wrong base URL, key or model, and shows the output mode the server takes, before
a long run finds out the hard way::

    $ GRAPHMEM_LLM_BASE_URL=http://127.0.0.1:8080/v1 GRAPHMEM_LLM_MODEL=smollm2 graphmem llm check
    http://127.0.0.1:8080/v1 (smollm2): ok in 0.41 s, output mode json_schema
    answer: red apple, fridge
    LLM usage: 1 requests, 412 prompt + 19 completion tokens, 0 fallbacks
"""

from __future__ import annotations

import argparse
import logging

from graphmem.errors import ConfigError
from graphmem.settings import Settings
from graphmem.stores.neo4j.uri import shown_uri


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    llm = sub.add_parser("llm", help="check the chat model endpoint (GRAPHMEM_LLM_*)")
    actions = llm.add_subparsers(dest="llm_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check", help="send one small request; exit 0 if the endpoint answers validly"
    )
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    if not getattr(args, "verbose", False):
        # The outcome is the answer or the one-line error; per-attempt warnings would repeat it.
        logging.getLogger("graphmem.llm").setLevel(logging.CRITICAL)
    settings = Settings.from_env()
    llm = settings.make_llm()
    if llm is None:
        raise ConfigError("set GRAPHMEM_LLM_BASE_URL (and GRAPHMEM_LLM_MODEL) to check an endpoint")
    words, seconds = llm.check()  # a failure is an LLMError: one line, exit 2
    usage = llm.usage.snapshot().summary()
    where = f"{shown_uri(settings.llm_base_url or '')} ({llm.name})"
    print(f"{where}: ok in {seconds:.2f} s, output mode {llm.output_mode}")
    print(f"answer: {', '.join(words)}")
    print(f"LLM usage: {usage}")
    return 0
