"""``python -m bench.check_census``: how often one search and one report_outcome check their input.

On the embedded store (in a temporary directory, six notes, the hashing embedder) it runs one
MCP ``search_memory`` and ``report_outcome`` (the tools' methods) and one API
``retrieve(open_episode=True)`` and ``finish_episode``, under a profiler that counts the graphmem
calls, the files they run in and the switches between files, and every namespace check
(``check_namespace``, or a use of ``NAMESPACE_RE`` outside it) and reward check
(``check_reward``, and ``check_alpha_reward`` where a checkout still has it), each put down to
the function that asked. tests/test_validation_once.py holds the result; this prints it, on any
checkout, for a before and after.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import graphmem
from graphmem import GraphMemory, HashingEmbedder
from graphmem.integrations.mcp_server import MemoryTools
from graphmem.models import NAMESPACE_RE
from graphmem.stores.embedded import EmbeddedStore

ROOT = str(Path(graphmem.__file__).parent) + "/"
NAMESPACE_CHECKS = {"check_namespace"}
REWARD_CHECKS = {"check_reward", "check_alpha_reward"}
PLUMBING = {"_namespace", "__new__", "validate", "__init__", "memory_from_dict", "_in_range"}
"""Frames between a check and the code that asked for it (a model's field, the type itself)."""


def _asker(frame: FrameType | None) -> str:
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(ROOT) and not code.co_name.startswith("<"):
            module = code.co_filename[len(ROOT) :]
            defining = module in {"models.py", "config.py", "stores/base.py"}
            if not defining or code.co_name not in NAMESPACE_CHECKS | REWARD_CHECKS | PLUMBING:
                return f"{module}:{code.co_name}"
        frame = frame.f_back
    return "outside graphmem"


def census(label: str, call: Callable[[], Any]) -> Any:
    """Run ``call`` under the profiler and print what it counted."""
    calls, switches, last = 0, 0, ""
    files: set[str] = set()
    checks: dict[str, collections.Counter[str]] = {
        "namespace": collections.Counter(),
        "reward": collections.Counter(),
    }

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls, switches, last
        code = frame.f_code
        if (
            event == "c_call"
            and getattr(arg, "__self__", None) is NAMESPACE_RE
            and code.co_name not in NAMESPACE_CHECKS
        ):
            checks["namespace"][_asker(frame)] += 1
        if event != "call" or not code.co_filename.startswith(ROOT):
            return
        module = code.co_filename[len(ROOT) :]
        calls += 1
        files.add(module)
        switches += bool(last) and module != last
        last = module
        if code.co_name in NAMESPACE_CHECKS and module == "models.py":
            checks["namespace"][_asker(frame.f_back)] += 1
        elif code.co_name in REWARD_CHECKS:
            checks["reward"][_asker(frame.f_back)] += 1

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    print(
        f"{label}: {calls} graphmem calls in {len(files)} files, {switches} file switches; "
        f"namespace checks {checks['namespace'].total()}, reward checks "
        f"{checks['reward'].total()}"
    )
    for kind, counted in checks.items():
        for where, n in sorted(counted.items()):
            print(f"    {kind} {n} {where}")
    return result


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m bench.check_census", description=__doc__).parse_args(
        argv
    )
    with tempfile.TemporaryDirectory() as directory:
        memory = GraphMemory(EmbeddedStore(directory), embedder=HashingEmbedder())
        for i in range(6):
            memory.add_note("census", f"note {i}: the kettle is in cupboard {i}")
        tools = MemoryTools(memory)
        tools.search_memory("warm up", namespace="census")
        found = census(
            "MCP search_memory",
            lambda: tools.search_memory("where is the kettle?", namespace="census"),
        )
        census(
            "MCP report_outcome",
            lambda: tools.report_outcome(found.episode_id, 1.0, namespace="census"),
        )
        retrieved = census(
            "API retrieve(open_episode=True)",
            lambda: memory.retrieve("census", "where is the kettle?", open_episode=True),
        )
        census(
            "API finish_episode",
            lambda: memory.finish_episode("census", retrieved.episode_id, 1.0),
        )
        memory.close()


if __name__ == "__main__":
    main()
