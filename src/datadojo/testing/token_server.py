"""A loopback token-in / token-out inference server: vLLM's ``/v1/completions`` with token-id prompts, and
the weight-update routes of vLLM and SGLang, every call recorded.

Why: the RL paths that talk to a real engine (the token-exact rollouts of :mod:`datadojo.env.tokens`,
the in-place weight updates of :mod:`datadojo.train.weight_sync`, the recording gateway) must be tested
over HTTP against something that answers the way vLLM does, with a model whose log-probs are real. The
server runs a ``handler(prompt_ids, sampling) -> GenOutput`` (:func:`hf_handler` wraps a tiny transformers
model; tests may script one) and, on a weight-update call, an optional ``reload(path)`` — with
:func:`hf_handler` the weights are really reloaded from the folder, so a test can tell an update happened
from the log-probs that follow.

Routes: ``POST /v1/completions`` (``prompt`` a list of ids; reply with ``token_ids``, ``logprobs.tokens`` as
``token_id:N`` and ``logprobs.token_logprobs``), ``POST /update_weights_from_disk`` (SGLang:
``{"model_path"}``), ``POST /collective_rpc`` (vLLM dev mode: ``{"method": "reload_weights", "kwargs"}``),
``POST /flush_cache`` and ``/reset_prefix_cache``, ``GET /v1/models``. ``calls`` lists ``(path, body)``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["TokenServer", "hf_handler"]

Handler = Callable[[list[int], dict[str, Any]], Any]


def hf_handler(model: Any, *, eos_token_id: int | None = None) -> tuple[Handler, Callable[[str], None]]:
    """``(handler, reload)`` over a transformers model: generation as :func:`datadojo.env.tokens.hf_generate`,
    ``reload(path)`` loads the weights saved in ``path`` into the same model object (in place)."""
    from datadojo.env.tokens import hf_generate

    gen = hf_generate(model, eos_token_id=eos_token_id)
    lock = threading.Lock()

    def handler(prompt_ids: list[int], sampling: dict[str, Any]) -> Any:
        with lock:
            return asyncio.run(gen(prompt_ids, sampling))

    def reload(path: str) -> None:
        from transformers import AutoModelForCausalLM

        fresh = AutoModelForCausalLM.from_pretrained(path)
        with lock:
            model.load_state_dict(fresh.state_dict())

    return handler, reload


class TokenServer:
    """Context manager serving ``handler`` on ``127.0.0.1`` (module docstring)."""

    def __init__(
        self, handler: Handler, *, reload: Callable[[str], None] | None = None, model: str = "toy"
    ) -> None:
        self.handler = handler
        self.reload = reload
        self.model = model
        self.calls: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def _answer(self, path: str, body: Any) -> tuple[int, Any]:
        route = path.split("?", 1)[0].rstrip("/")
        with self._lock:
            self.calls.append((route, body))
        if route.endswith("/completions"):
            prompt = body.get("prompt")
            if not isinstance(prompt, list) or not all(isinstance(i, int) for i in prompt):
                return 400, {"error": {"message": "prompt must be a list of token ids"}}
            sampling = {
                k: body[k] for k in ("temperature", "top_p", "max_tokens", "seed", "stop") if k in body
            }
            out = self.handler(prompt, sampling)
            lps = out.log_probs or [0.0] * len(out.token_ids)
            choice = {
                "index": 0,
                "text": "",
                "token_ids": out.token_ids,
                "logprobs": {"tokens": [f"token_id:{t}" for t in out.token_ids], "token_logprobs": lps},
                "finish_reason": "length" if out.stop_reason == "length" else "stop",
            }
            return 200, {
                "id": "cmpl-toy",
                "object": "text_completion",
                "model": self.model,
                "choices": [choice],
            }
        if route in ("/update_weights_from_disk", "/collective_rpc"):
            path_ = (
                body.get("model_path")
                if route == "/update_weights_from_disk"
                else (body.get("kwargs") or {}).get("weights_path")
            )
            if not path_:
                return 400, {"success": False, "message": "no weights path"}
            if self.reload is not None:
                self.reload(str(path_))
            return 200, {"success": True, "message": "Succeeded to update model weights."}
        if route in ("/flush_cache", "/reset_prefix_cache"):
            return 200, {"success": True}
        return 404, {"error": {"message": f"no route {path}"}}

    def __enter__(self) -> TokenServer:
        server = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                code, data = server._answer(self.path, body)
                self._send(code, data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
