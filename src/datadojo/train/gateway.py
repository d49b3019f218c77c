"""The token-exact gateway: an OpenAI-compatible recording proxy that keeps the token ids and log-probs of
every completion.

Why: a trainer that drives DataDojo through a plain OpenAI client (``datadojo rollout --model
openai:NAME@GATEWAY``, an external agent framework, TRL's or verl's own HTTP path) gets text back and would
re-tokenize it. Put this proxy between the client and vLLM / SGLang: it forwards every
``/v1/chat/completions`` and ``/v1/completions`` request unchanged except that it asks the engine for
log-probs and token ids (``logprobs``, ``return_token_ids``, ``return_tokens_as_token_ids`` — vLLM's names;
engines ignore fields they do not know), passes the reply back, and appends one JSONL record per choice::

    {"path", "request_id", "messages" | "prompt", "prompt_token_ids", "token_ids", "logprobs",
     "finish_reason", "text"}

so every rollout made through it can be rebuilt token for token
(:func:`datadojo.env.tokens.parse_completion_choice` reads the same shapes). The log is append-only
(one ``write`` per record under a lock) and survives restarts; a client's own ``logprobs`` request is
honoured as sent.

Run it with ``datadojo train gateway --upstream http://vllm:8000/v1 --out completions.jsonl``.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from datadojo.env.tokens import EpisodeError, parse_completion_choice

__all__ = ["RecordingGateway"]


def _augment(path: str, body: dict[str, Any]) -> dict[str, Any]:
    out = dict(body)
    if path.endswith("/chat/completions"):
        out.setdefault("logprobs", True)
    else:
        out.setdefault("logprobs", 1)
    out.setdefault("return_token_ids", True)
    out.setdefault("return_tokens_as_token_ids", True)
    return out


class RecordingGateway:
    """The proxy (module docstring) on ``host:port`` (0: a free port), forwarding to ``upstream``
    (e.g. ``http://127.0.0.1:8000/v1``), recording to ``out``."""

    def __init__(
        self,
        upstream: str,
        out: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout_s: float = 600.0,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.out = Path(out)
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.recorded = 0
        self.unexact = 0  # choices whose engine gave no token ids
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://{self.host}:{self._httpd.server_address[1]}/v1"

    def _forward(self, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        sub = path.split("/v1", 1)[1] if "/v1" in path else path
        body: Any = None
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            pass
        completion = isinstance(body, dict) and sub.rstrip("/").endswith("completions")
        data = json.dumps(_augment(sub, body)).encode() if completion else raw
        fwd = {k: v for k, v in headers.items() if k.lower() in ("authorization", "content-type")}
        req = urllib.request.Request(self.upstream + sub, data=data, headers=fwd, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                code, reply = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            return 502, json.dumps({"error": {"message": f"gateway: upstream {self.upstream}: {e}"}}).encode()
        if completion and code == 200:
            self._record(sub, body, reply)
        return code, reply

    def _record(self, path: str, request: dict[str, Any], reply: bytes) -> None:
        try:
            data = json.loads(reply)
        except json.JSONDecodeError:
            return
        lines = []
        for choice in data.get("choices") or []:
            rec: dict[str, Any] = {
                "path": path,
                "request_id": data.get("id"),
                "prompt_token_ids": data.get("prompt_token_ids") or choice.get("prompt_token_ids"),
                "finish_reason": choice.get("finish_reason"),
                "text": (choice.get("message") or {}).get("content", choice.get("text")),
            }
            if "messages" in request:
                rec["messages"] = request["messages"]
            else:
                rec["prompt"] = request.get("prompt")
            try:
                gen = parse_completion_choice(choice, where=path)
                rec["token_ids"], rec["logprobs"] = gen.token_ids, gen.log_probs
            except EpisodeError:
                rec["token_ids"], rec["logprobs"] = None, None
                self.unexact += 1
            lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
        with self._lock, self.out.open("a", encoding="utf-8") as f:
            f.write("".join(lines))
            self.recorded += len(lines)

    def start(self) -> RecordingGateway:
        gw = self
        self.out.parent.mkdir(parents=True, exist_ok=True)

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                sub = self.path.split("/v1", 1)[1] if "/v1" in self.path else self.path
                try:
                    with urllib.request.urlopen(gw.upstream + sub, timeout=gw.timeout_s) as resp:
                        self._reply(resp.status, resp.read())
                except urllib.error.HTTPError as e:
                    self._reply(e.code, e.read())
                except (urllib.error.URLError, OSError) as e:
                    self._reply(502, json.dumps({"error": {"message": str(e)}}).encode())

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                code, payload = gw._forward(self.path, self.rfile.read(n), dict(self.headers.items()))
                self._reply(code, payload)

        self._httpd = ThreadingHTTPServer((self.host, self.port), H)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def serve_forever(self) -> None:
        """Run in the foreground until interrupted (the CLI)."""
        self.start()
        try:
            threading.Event().wait()
        finally:
            self.stop()

    def __enter__(self) -> RecordingGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
