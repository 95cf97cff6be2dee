"""A text-game environment's JVM is shut down once, by ``close()``, and never again by the
library's ``__del__`` wherever the garbage collector runs (issue 47: under ``langgraph dev``
that was the event loop, which logged BlockingError and py4j tracebacks after good runs)."""

from __future__ import annotations

import gc
import logging

import pytest

from showcase.envs.jvm import close_once


class FakeEnv:
    """Closes like TextWorldExpress and ScienceWorld: ``__del__`` calls ``close()``."""

    closes = 0

    def close(self) -> None:
        FakeEnv.closes += 1
        if FakeEnv.closes > 1:
            raise RuntimeError("Gateway is not connected.")

    def __del__(self) -> None:
        self.close()


def test_close_once_disarms_del() -> None:
    FakeEnv.closes = 0
    env = FakeEnv()
    close_once(env, "fake")
    close_once(env, "fake")  # a second explicit close does nothing either
    del env
    gc.collect()
    assert FakeEnv.closes == 1


@pytest.mark.java
@pytest.mark.slow
def test_a_closed_textworld_env_logs_nothing_when_collected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("textworld_express")
    from showcase.envs import has_java17
    from showcase.envs.textworld import TextWorldEnv

    if not has_java17():
        pytest.skip("Java 17 is not installed")
    with caplog.at_level(logging.INFO, logger="py4j"):
        env = TextWorldEnv("twc", step_budget=5)
        env.reset(0)
        env.close()
        del env
        gc.collect()
    failures = [r for r in caplog.records if r.exc_info or "Exception" in r.getMessage()]
    assert not failures, [r.getMessage() for r in failures]
