"""An OpenAI-compatible chat server for tests (stdlib ``http.server`` in a thread).

It serves ``POST /v1/chat/completions`` the way llama.cpp's server and OpenAI do, for the
graphmem operation named on the system prompt's first line (``graphmem op: <name>``):

- ``response_format={"type": "json_schema", ...}``: the reply follows the schema sent (checked
  with ``jsonschema``; a reply that would not fit is a 500, so a wrong schema fails loudly);
- ``tools`` with a forced ``tool_choice``: the reply is that tool call;
- ``response_format={"type": "json_object"}``: a JSON object;
- nothing: what the "model" writes unconstrained (``unconstrained=``: ``valid`` for a capable
  model, ``prose`` for a small one that chats instead of writing JSON);
- ``max_tokens`` / ``max_completion_tokens``: honoured by ``ramble`` (which otherwise writes up
  to the context size, finish_reason ``length``).

``supports`` lists the constraints it takes; others are refused with HTTP 400, like a server
without structured output. Tests script misbehaviour for the next replies::

    with OpenAIStub() as stub:
        stub.queue("invalid_json", "valid")          # next two replies, any operation
        stub.queue("http_500", op="distill_script")  # next distill_script reply only
        stub.always("hang")                          # every reply from now on
        llm = MemoryLLM.from_openai(base_url=stub.base_url, model="stub", api_key="sk-test")

It counts what it served: every request (``served``) with the tokens it charged, so tests can
hold a client's accounting against the server's.
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema

from graphmem.llm.client import forget_output_modes

BEHAVIOURS = (
    "valid",
    "fenced",  # valid JSON inside ```json fences with chatter around it
    "prose",  # chatter without any JSON (a small model unconstrained)
    "invalid_json",
    "missing_fields",
    "wrong_types",
    "empty",
    "ramble",  # writes until the token cap (or the context size): finish_reason "length"
    "hang",  # never answers (until the stub stops or hang_seconds pass)
    "drip",  # sends its headers, then one byte every drip_seconds (never a whole reply)
    "huge",  # ignores max_tokens: a 100k-token reply at once
    "cut_tool",  # a forced tool call cut at the cap, finish_reason "tool_calls" (llama-cpp-python)
    "generate",  # one slot: generates for generate_seconds unless the client hangs up
    "http_400",
    "http_401",
    "http_404",
    "http_500",
)
CONTENT_FAULTS = ("fenced", "prose", "invalid_json", "missing_fields", "wrong_types", "empty")
CONTEXT_TOKENS = 4096
ALL_FORMATS = ("json_schema", "tools", "json_object")

_OP = re.compile(r"graphmem op: (\w+)")
_ACTION = re.compile(r"action: (.*?)(?: \| (?:observation|reward): |$)", re.MULTILINE)
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
        kept = list(dict.fromkeys(actions[:4] + actions[-1:]))  # the last one finished the task
        return {"steps": [f"stub: {a}" for a in kept] or ["stub: act"], "notes": ""}
    if op == "distill_knowledge":
        actions = list(dict.fromkeys(a.strip() for a in _ACTION.findall(user)))
        return {
            "notes": [
                {"subject": a.split()[-1], "facts": [f"stub fact: {a} works"], "retracts": []}
                for a in actions[:2]
            ]
        }
    if op == "reflect":
        actions = [a.strip() for a in _ACTION.findall(user)]
        return {
            "tip": f"stub tip: check the receptacle before '{(actions or ['acting'])[0]}'.",
            "polarity": "avoid",
            "failed_step": 0,
            "corrected_steps": None,
        }
    if op == "decide_links":
        ids = re.findall(r'"id": "([^"]+)"', user)
        about = " ".join(words[:2]) or "memory"
        return {
            "links": [
                {
                    "id": i,
                    "reason": f"stub link: both about {about}",
                    "strength": 0.9,
                    "newer_fact": "since" in words,  # "... since ...": a change, says the stub
                }
                for i in ids[:1]
            ],
            "updates": [
                {"id": i, "context": f"stub refreshed context about {about}"} for i in ids[:1]
            ],
        }
    if op == "choose_action":
        actions = user.split("Valid actions:\n", 1)[-1].splitlines()
        useful = [a for a in actions if a and not a.startswith(("look", "inventory"))]
        return {"action": (useful or actions or ["look around"])[0], "thought": "stub choice"}
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


def _hung_up(sock: socket.socket) -> bool:
    """Whether the client closed its end (readable, and reading would return nothing)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _tokens(text: str) -> int:
    """The stub's tokenizer: one token per four characters, at least one."""
    return 1 + len(text) // 4


class OpenAIStub:
    """The server. ``requests`` holds every request (body, Authorization header, behaviour);
    ``served`` what it charged for each (status, prompt and completion tokens)."""

    def __init__(
        self,
        model: str = "stub-model",
        *,
        unconstrained: str = "valid",
        supports: tuple[str, ...] = ALL_FORMATS,
        hang_seconds: float = 30.0,
        refusal_status: int = 400,
        drip_seconds: float = 0.3,
        generate_seconds: float = 10.0,
    ) -> None:
        if unconstrained not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {unconstrained!r}")
        self.model = model
        self.unconstrained = unconstrained
        self.supports = supports
        self.hang_seconds = hang_seconds
        self.drip_seconds = drip_seconds
        self.generate_seconds = generate_seconds
        self.generations: list[tuple[float, float, bool]] = []
        """(waited for the slot, generated, finished) seconds of each ``generate`` request."""
        self._slot = threading.Lock()  # one generation at a time, like one llama.cpp slot
        # 400 like OpenAI and vLLM; llama-cpp-python's server refuses "json_schema" with a 500.
        self.refusal_status = refusal_status
        self.requests: list[dict[str, Any]] = []
        self.served: list[dict[str, Any]] = []
        self._queues: dict[str | None, deque[str]] = {}
        self._lock = threading.Lock()
        self._release = threading.Event()
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

    def _next(self, op: str) -> str | None:
        with self._lock:
            for key in (op, None):
                q = self._queues.get(key)
                if q:
                    return q.popleft()
        return None

    # ---- what was asked and served ------------------------------------------------------

    def ops(self) -> list[str]:
        """The operation of each request so far, in order."""
        return [r["op"] for r in self.requests]

    @property
    def usage(self) -> list[tuple[int, int]]:
        """(prompt, completion) tokens of each completed reply."""
        return [
            (s["prompt_tokens"], s["completion_tokens"]) for s in self.served if s["status"] == 200
        ]

    @property
    def prompt_tokens(self) -> int:
        return sum(s["prompt_tokens"] for s in self.served)

    @property
    def completion_tokens(self) -> int:
        return sum(s["completion_tokens"] for s in self.served)

    def constraint(self, i: int) -> str:
        """How request ``i`` constrained its reply: json_schema, tools, json_object or none."""
        body = self.requests[i]["body"]
        if body.get("tools"):
            return "tools"
        return str((body.get("response_format") or {}).get("type", "none"))

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
                if self.path.rstrip("/") != "/v1/chat/completions":
                    stub._count({"op": "none", "behaviour": "no_route", "body": body}, 404)
                    self._send(404, {"error": {"message": f"File Not Found: {self.path}"}})
                    return
                stub._answer(self, body)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout): nothing to answer

        self._release.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        forget_output_modes(self.base_url)  # a port reused: what an old stub refused is no news
        return self

    def _count(
        self, request: dict[str, Any], status: int, prompt: int = 0, completion: int = 0
    ) -> None:
        with self._lock:
            self.requests.append(request)
            self.served.append(
                {"status": status, "prompt_tokens": prompt, "completion_tokens": completion}
            )

    def _answer(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages", [])
        system = next((str(m.get("content", "")) for m in messages if m["role"] == "system"), "")
        user = next((str(m.get("content", "")) for m in messages if m["role"] == "user"), "")
        match = _OP.search(system)
        op = match.group(1) if match else "unknown"
        fmt = body.get("response_format") or {}
        constraint = "tools" if body.get("tools") else str(fmt.get("type", "none"))
        scripted = self._next(op)
        behaviour = scripted or ("valid" if constraint != "none" else self.unconstrained)
        request = {
            "op": op,
            "behaviour": behaviour,
            "body": body,
            "authorization": handler.headers.get("Authorization", ""),
        }
        if constraint != "none" and constraint not in self.supports:
            self._count(request, self.refusal_status)
            message = f"'response_format' of type '{constraint}' is not supported"
            if constraint == "tools":
                message = "tools are not supported by this server"
            error = {"error": {"message": message, "type": "invalid_request_error"}}
            handler._send(self.refusal_status, error)
            return
        if behaviour.startswith("http_"):
            status = int(behaviour[5:])
            self._count(request, status)
            messages_by_status = {
                400: "bad request",
                401: "Incorrect API key provided",
                404: f"The model '{body.get('model')}' does not exist",
                500: "stub internal error",
            }
            handler._send(
                status, {"error": {"message": messages_by_status[status], "type": "server"}}
            )
            return
        if behaviour == "hang":
            self._count(request, 0)
            self._release.wait(self.hang_seconds)
            return  # the connection closes without an answer
        if behaviour == "drip":
            self._count(request, 0)
            self._drip(handler)
            return
        if behaviour == "generate":
            self._count(request, 0)
            self._generate(handler)
            return
        prompt_tokens = _tokens("".join(str(m.get("content", "")) for m in messages))
        reply = valid_reply(op, user)
        if constraint == "json_schema" and behaviour != "huge":
            schema = fmt.get("json_schema", {}).get("schema", {})
            try:
                jsonschema.validate(reply, schema)
            except jsonschema.ValidationError as e:
                self._count(request, 500)
                handler._send(
                    500, {"error": {"message": f"stub: no reply fits the schema: {e.message}"}}
                )
                return
        finish = "stop"
        if behaviour == "valid":
            content = json.dumps(reply)
        elif behaviour == "fenced":
            content = f"Sure! Here it is:\n```json\n{json.dumps(reply, indent=2)}\n```\nDone."
        elif behaviour == "prose":
            content = "Sure! I think the answer is about the things you mentioned. Let me know!"
        elif behaviour == "invalid_json":
            content = '{"keywords": ["unterminated", '
        elif behaviour == "missing_fields":
            content = json.dumps({"comment": "I forgot the fields"})
        elif behaviour == "wrong_types":
            content = json.dumps(_wrong_types(reply))
        elif behaviour == "huge":
            content = '{"keywords": ["' + "la " * 133_000 + '"]}'  # about 100k tokens
        elif behaviour in ("ramble", "cut_tool"):
            cap = body.get("max_tokens") or body.get("max_completion_tokens") or CONTEXT_TOKENS
            cap = min(int(cap), CONTEXT_TOKENS - prompt_tokens)
            content = ('{"keywords": ["' + "la " * (4 * cap))[: 4 * (cap - 1)]
            finish = "length"
        else:  # empty
            content = ""
        completion_tokens = _tokens(content) if behaviour != "huge" else 100_000
        self._count(request, 200, prompt_tokens, completion_tokens)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if constraint == "tools" and behaviour not in ("ramble", "empty", "prose", "huge"):
            name = body["tools"][0]["function"]["name"]
            arguments = content if behaviour != "fenced" else json.dumps(reply)
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call-{len(self.requests)}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            }
            finish = "tool_calls"  # llama-cpp-python says so even when it cut the call
        handler._send(
            200,
            {
                "id": f"chatcmpl-stub-{len(self.requests)}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body.get("model", self.model),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def _drip(self, handler: Any) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "100000")
            handler.end_headers()
            handler.wfile.flush()
            while not self._release.wait(self.drip_seconds):
                handler.wfile.write(b" ")
                handler.wfile.flush()
        except OSError:
            pass  # the client hung up

    def _generate(self, handler: Any) -> None:
        """Hold the one slot for ``generate_seconds``, stopping early when the client hangs up
        (as llama.cpp's server does); a request that comes meanwhile waits for the slot."""
        asked = time.monotonic()
        with self._slot:
            started = time.monotonic()
            finished = True
            while time.monotonic() - started < self.generate_seconds:
                if _hung_up(handler.connection) or self._release.is_set():
                    finished = False
                    break
                time.sleep(0.02)
            with self._lock:
                self.generations.append((started - asked, time.monotonic() - started, finished))
        handler.close_connection = True

    def stop(self) -> None:
        self._release.set()  # let hanging handlers go
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
