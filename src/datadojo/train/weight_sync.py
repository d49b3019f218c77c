"""In-place weight updates of a generation server: the trainer's new policy into SGLang or vLLM, no restart.

Why: an RL step that restarts its vLLM server to load new weights spends minutes per step and loses the
prefix cache; every engine now exposes a control route that reloads weights into the running server.
:class:`WeightSync` saves the policy (gathered from DDP / FSDP / DeepSpeed, written atomically) to
``<folder>/step_N`` and asks the server to load it:

* ``sglang`` — ``POST /update_weights_from_disk {"model_path": ..., "abort_all_requests": false}`` (SGLang's
  documented route; the reply's ``success`` must be true), then ``POST /flush_cache``;
* ``vllm`` — ``POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": ...}}`` (vLLM's
  dev-mode RPC route, enabled with ``VLLM_SERVER_DEV_MODE=1``), then ``POST /reset_prefix_cache``.

The push happens every ``max_lag + 1`` steps, so rollouts are at most ``max_lag`` steps behind the trainer
(0 = on-policy up to the in-flight step); :attr:`policy_lag` is that lag for the *next* step's rollouts and
the trainer logs it. A server that refuses raises :class:`~datadojo.llm.LLMError` (exit 3): training on
after a failed update would silently train off-policy.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Literal

from datadojo.llm.base import LLMError
from datadojo.train.checkpoint import save_hf_model

__all__ = ["WeightSync", "server_root"]

Kind = Literal["sglang", "vllm"]


def server_root(base_url: str) -> str:
    """``http://host:port`` of an OpenAI base URL (``.../v1`` dropped): where the control routes live."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class WeightSync:
    """Pushes weights to the server at ``root`` (module docstring). ``kind`` is ``sglang`` or ``vllm``."""

    def __init__(
        self, root: str, kind: Kind, folder: str | Path, *, max_lag: int = 0, timeout_s: float = 600.0
    ) -> None:
        if kind not in ("sglang", "vllm"):
            raise ValueError(f"weight update kind must be sglang or vllm, got {kind!r}")
        self.root = root.rstrip("/")
        self.kind: Kind = kind
        self.folder = Path(folder)
        self.max_lag = max_lag
        self.timeout_s = timeout_s
        self.steps = 0  # trainer steps seen
        self.served_step = 0  # the trainer step whose weights the server holds (0: the initial ones)
        self.pushes = 0

    @property
    def policy_lag(self) -> int:
        """Steps between the trainer's weights and the server's, for the rollouts of the next step."""
        return self.steps - self.served_step

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        url = self.root + route
        req = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise LLMError(
                f"weight update: {url} answered {e.code}: {e.read()[:300]!r}", retryable=False, status=e.code
            ) from e
        except (urllib.error.URLError, OSError) as e:
            raise LLMError(f"weight update: {url}: {e}", retryable=True) from e
        try:
            data = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            data = {}
        if isinstance(data, dict) and data.get("success") is False:
            raise LLMError(f"weight update: {url} refused: {data.get('message')}", retryable=False)
        return data if isinstance(data, dict) else {}

    def load(self, path: str | Path) -> None:
        """Ask the server to load the checkpoint folder ``path`` in place."""
        p = str(Path(path).resolve())
        if self.kind == "sglang":
            self._post("/update_weights_from_disk", {"model_path": p, "abort_all_requests": False})
            self._post("/flush_cache", {})
        else:
            self._post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": p}})
            self._post("/reset_prefix_cache", {})

    def step(self, accelerator: Any, model: Any, tokenizer: Any) -> bool:
        """After a trainer step: push the weights when the lag would exceed ``max_lag``; True when pushed."""
        self.steps += 1
        if self.steps - self.served_step <= self.max_lag:
            return False
        target = self.folder / f"step_{self.steps:06d}"
        save_hf_model(accelerator, model, tokenizer, target)
        if accelerator.is_main_process:
            self.load(target)
            for old in self.folder.glob("step_*"):  # the server holds the new weights: older copies go
                if old != target and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
        accelerator.wait_for_everyone()
        self.served_step = self.steps
        self.pushes += 1
        return True
