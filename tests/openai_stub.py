"""A tiny OpenAI-compatible chat server for tests (stdlib ``http.server`` in a thread).

It answers ``POST /v1/chat/completions`` with schema-valid JSON for the graphmem operation named
on the system prompt's first line (``graphmem op: <name>``), derived from the prompt, with usage
numbers. Tests queue misbehaviour to exercise retries and fallbacks::

    with OpenAIStub() as stub:
        stub.queue("invalid_json", "valid")          # next two replies, any operation
        stub.queue("http_500", op="distill_script")  # next distill_script reply only
        llm = MemoryLLM.from_openai(base_url=stub.base_url, model="stub", api_key="sk-test")
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = (
    "valid",
    "fenced",  # valid JSON inside ```json fences with chatter around it
    "invalid_json",
    "missing_fields",
    "wrong_types",
    "http_500",
    "empty",
)

_OP = re.compile(r"graphmem op: (\w+)")
_ACTION = re.compile(r"action: (.*?)(?: \| observation: |$)", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z]{4,}")


def valid_reply(op: str, user: str) -> dict[str, Any]:
    """A schema-valid answer for ``op`` that depends on the prompt text."""
    words = [w.lower() for w in _WORD.findall(user.split("\n", 1)[-1])]
    if op == "extract_note_fields":
        return {
            "keywords": ["stubkey", *words[:3]],
            "tags": ["stubtag"],
            "context": f"Stub context about {' '.join(words[:3]) or 'nothing'}.",
            "category": "stubcat",
        }
    if op == "extract_keywords":
        return {"keywords": ["stubkey", *words[:3]]}
    if op == "distill_script":
        actions = list(dict.fromkeys(a.strip() for a in _ACTION.findall(user)))
        return {"steps": [f"stub: {a}" for a in actions[:5]] or ["stub: act"], "notes": ""}
    if op == "reflect":
        return {
            "tip": "stub tip: check the receptacle before acting.",
            "polarity": "avoid",
            "failed_step": 0,
            "corrected_steps": None,
        }
    if op == "decide_links":
        ids = re.findall(r'"id": "([^"]+)"', user)
        return {
            "links": [{"id": i, "reason": "stub link", "strength": 0.9} for i in ids[:1]],
            "updates": [{"id": i, "context": "stub refreshed context"} for i in ids[:1]],
        }
    return {"answer": "unknown operation"}


def _wrong_types(reply: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in reply.items():
        if isinstance(value, list):
            out[key] = ", ".join(str(v) for v in value)
        elif isinstance(value, str):
            out[key] = 42
        else:
            out[key] = "wrong"
    return out


class OpenAIStub:
    """The server; ``requests`` holds every request body (and its Authorization header)."""

    def __init__(self, model: str = "stub-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.usage: list[tuple[int, int]] = []
        self._queues: dict[str | None, deque[str]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- scripting ----------------------------------------------------------------------

    def queue(self, *behaviours: str, op: str | None = None) -> None:
        """Queue behaviours for the next replies (of ``op`` only, or of any operation)."""
        for b in behaviours:
            if b not in BEHAVIOURS:
                raise ValueError(f"unknown behaviour {b!r}")
        with self._lock:
            self._queues.setdefault(op, deque()).extend(behaviours)

    def always(self, behaviour: str, op: str | None = None) -> None:
        """Misbehave for the next 1000 replies (enough to exhaust any retry)."""
        self.queue(*([behaviour] * 1000), op=op)

    def clear(self) -> None:
        with self._lock:
            self._queues.clear()

    def _next(self, op: str) -> str:
        with self._lock:
            for key in (op, None):
                q = self._queues.get(key)
                if q:
                    return q.popleft()
        return "valid"

    def ops(self) -> list[str]:
        """The operation of each request so far, in order."""
        return [r["op"] for r in self.requests]

    # ---- serving ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the stub first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> OpenAIStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                stub._answer(self, body)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def _answer(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages", [])
        system = next((str(m.get("content", "")) for m in messages if m["role"] == "system"), "")
        user = next((str(m.get("content", "")) for m in messages if m["role"] == "user"), "")
        match = _OP.search(system)
        op = match.group(1) if match else "unknown"
        behaviour = self._next(op)
        with self._lock:
            self.requests.append(
                {
                    "op": op,
                    "behaviour": behaviour,
                    "body": body,
                    "authorization": handler.headers.get("Authorization", ""),
                }
            )
        if behaviour == "http_500":
            handler._send(500, {"error": {"message": "stub internal error", "type": "server"}})
            return
        reply = valid_reply(op, user)
        if behaviour == "valid":
            content = json.dumps(reply)
        elif behaviour == "fenced":
            content = f"Sure! Here it is:\n```json\n{json.dumps(reply, indent=2)}\n```\nDone."
        elif behaviour == "invalid_json":
            content = '{"keywords": ["unterminated", '
        elif behaviour == "missing_fields":
            content = json.dumps({"comment": "I forgot the fields"})
        elif behaviour == "wrong_types":
            content = json.dumps(_wrong_types(reply))
        else:  # empty
            content = ""
        prompt_tokens = 1 + sum(len(str(m.get("content", ""))) for m in messages) // 4
        completion_tokens = 1 + len(content) // 4
        with self._lock:
            self.usage.append((prompt_tokens, completion_tokens))
        handler._send(
            200,
            {
                "id": f"chatcmpl-stub-{len(self.requests)}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body.get("model", self.model),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
