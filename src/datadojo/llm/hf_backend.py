"""Chat completions from a local transformers checkpoint (CPU or GPU), with batching across callers.

Why a local backend at all: small-model experiments, CI and training-time sanity checks should not
need a server. The behaviour matches the OpenAI-compatible servers the rest of the project talks to:
the prompt is the tokenizer's own chat template with the generation prompt appended; generation stops at
EOS, at ``max_tokens``, or at a stop string (transformers' ``stop_strings``), and the returned text is
cut *before* the stop string, as vLLM and the OpenAI API do.

Concurrency: the agent runtime calls :meth:`chat` from many coroutines at once. Each call is queued; a
single drainer task gathers the calls that arrive within ``batch_wait_s`` and share sampling settings
into one left-padded ``generate`` batch (up to ``max_batch_size`` rows, ``n`` rows per call) and runs it
in a worker thread so the event loop keeps serving sandboxes meanwhile. A lock serializes ``generate``
across threads and loops.

torch and transformers are imported lazily, so the base install (OpenAI backend only) does not need them.
Nothing is downloaded: checkpoints load with ``local_files_only=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from datadojo.errors import require_extra
from datadojo.llm.base import (
    ChatBackend,
    Completion,
    LLMError,
    Message,
    ModelSpecError,
    SamplingParams,
    apply_stop,
)

__all__ = ["DTYPES", "HFBackend"]

DTYPES: tuple[str, ...] = ("auto", "float32", "float16", "bfloat16")


def _import_torch() -> tuple[Any, Any]:
    require_extra("hf", "the hf backend (--model hf:PATH)", "torch", "transformers")
    import torch
    import transformers

    return torch, transformers


@dataclass
class _Job:
    prompt_ids: list[int]
    params: SamplingParams
    max_new: int
    future: asyncio.Future[list[Completion]]
    enqueued: float

    @property
    def key(self) -> tuple[Any, ...]:
        p = self.params
        # Calls batch together only when one generate() call can serve them all.
        return (p.temperature if p.temperature > 0 else 0.0, p.top_p, p.stop, p.seed, self.max_new)


class HFBackend(ChatBackend):
    """A :class:`ChatBackend` running a causal LM checkpoint in this process.

    Args:
        path: a local checkpoint folder (or the id of a model already in the local HF cache).
        device: ``auto`` (CUDA if available, else CPU), ``cpu``, ``cuda``, ``cuda:1``, ``mps``.
        dtype: ``auto`` (bfloat16 on CUDA when supported, else float32), ``float32``, ``float16``, ``bfloat16``.
        context_window: defaults to the config's ``max_position_embeddings``.
        max_batch_size: most sequences per ``generate`` call (``n`` counts per call).
        default_max_tokens: cap on new tokens when a call gives no ``max_tokens``.
        batch_wait_s: how long the drainer waits for more callers before starting a batch.
        trust_remote_code: passed to transformers; off by default (it executes checkpoint code).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str = "auto",
        dtype: str = "auto",
        context_window: int | None = None,
        max_batch_size: int = 16,
        default_max_tokens: int = 1024,
        batch_wait_s: float = 0.002,
        trust_remote_code: bool = False,
    ) -> None:
        path = os.fspath(path)
        if not os.path.isdir(path):  # before the hub's own error: hf:PATH is a local folder, never a download
            raise ModelSpecError(
                f"hf backend: {path}: no such folder (hf:PATH names a local checkpoint folder, e.g. "
                "hf:/models/Qwen2.5-7B-Instruct; nothing is downloaded)"
            )
        if dtype not in DTYPES:
            raise ModelSpecError(
                f"hf backend {path}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}"
            )
        if not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ModelSpecError(f"hf backend {path}: max_batch_size must be a positive integer")
        if not isinstance(default_max_tokens, int) or default_max_tokens < 1:
            raise ModelSpecError(f"hf backend {path}: default_max_tokens must be a positive integer")
        if batch_wait_s < 0:
            raise ModelSpecError(f"hf backend {path}: batch_wait_s must be >= 0")
        torch, transformers = _import_torch()
        self.path = path
        self.device = _resolve_device(torch, device)
        torch_dtype = _resolve_dtype(torch, dtype, self.device)
        try:
            tok = transformers.AutoTokenizer.from_pretrained(
                path, local_files_only=True, trust_remote_code=trust_remote_code
            )
            kw = {"dtype" if _dtype_kwarg_is_new(transformers) else "torch_dtype": torch_dtype}
            model = transformers.AutoModelForCausalLM.from_pretrained(
                path, local_files_only=True, trust_remote_code=trust_remote_code, **kw
            )
        except (OSError, ValueError) as e:
            raise ModelSpecError(
                f"hf backend: cannot load checkpoint {path!r} (offline, local files only): {e}"
            ) from e
        if not getattr(tok, "chat_template", None):
            raise ModelSpecError(
                f"hf backend {path}: the tokenizer has no chat template; set one in tokenizer_config.json"
            )
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            if tok.eos_token is None:
                raise ModelSpecError(f"hf backend {path}: the tokenizer has neither a pad nor an eos token")
            tok.pad_token = tok.eos_token
        model.to(self.device)
        model.eval()
        if context_window is None:
            context_window = getattr(model.config, "max_position_embeddings", None)
        super().__init__(model_id=path, context_window=context_window)
        self.tokenizer = tok
        self.model = model
        self.max_batch_size = max_batch_size
        self.default_max_tokens = default_max_tokens
        self.batch_wait_s = float(batch_wait_s)
        self._torch = torch
        self._eos_ids = _eos_ids(model, tok)
        self._gen_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[_Job] = []
        self._drainer: asyncio.Task[None] | None = None
        self.batches_run = 0  # generate() calls made; lets tests and benchmarks see batching happen

    def __repr__(self) -> str:
        return (
            f"HFBackend(path={self.path!r}, device={self.device!r}, context_window={self.context_window!r})"
        )

    # -- prompt ----------------------------------------------------------------------------------

    def encode(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat-templated prompt (generation prompt included)."""
        text = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Exact prompt length under the tokenizer's chat template."""
        return len(self.encode(messages))

    # -- generation --------------------------------------------------------------------------------

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        if self.model is None:
            raise LLMError(f"hf backend {self.path}: closed", retryable=False)
        prompt = self.encode(messages)
        max_new = params.max_tokens or self.default_max_tokens
        if self.context_window is not None:
            room = self.context_window - len(prompt)
            if room < 1:
                raise LLMError(
                    f"hf backend {self.path}: prompt of {len(prompt)} tokens leaves no room in the "
                    f"{self.context_window}-token context window",
                    retryable=False,
                    context_overflow=True,
                )
            max_new = min(max_new, room)
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._pending, self._drainer = loop, [], None
        job = _Job(prompt, params, max_new, loop.create_future(), time.perf_counter())
        self._pending.append(job)
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await job.future

    async def _drain(self) -> None:
        await asyncio.sleep(self.batch_wait_s)
        while self._pending:
            head = self._pending[0]
            batch: list[_Job] = []
            rows = 0
            for job in self._pending:
                if job.key == head.key and (not batch or rows + job.params.n <= self.max_batch_size):
                    batch.append(job)
                    rows += job.params.n
            taken = {id(j) for j in batch}
            self._pending = [j for j in self._pending if id(j) not in taken]
            live = [j for j in batch if not j.future.done()]  # a cancelled caller needs no rows
            if not live:
                continue
            try:
                results = await asyncio.to_thread(self._run_batch, live)
            except Exception as e:
                err = LLMError(
                    f"hf backend {self.path}: generation failed: {type(e).__name__}: {e}", retryable=False
                )
                for j in live:
                    if not j.future.done():
                        j.future.set_exception(err)
                continue
            now = time.perf_counter()
            for j, comps in zip(live, results, strict=True):
                if not j.future.done():
                    lat = now - j.enqueued
                    j.future.set_result([dataclasses.replace(c, latency_s=lat) for c in comps])

    def _run_batch(self, jobs: list[_Job]) -> list[list[Completion]]:
        """One generate() call for ``jobs`` (same sampling key); runs in a worker thread."""
        torch = self._torch
        params, max_new = jobs[0].params, jobs[0].max_new
        rows = [j.prompt_ids for j in jobs for _ in range(j.params.n)]
        enc = self.tokenizer.pad({"input_ids": rows}, padding=True, return_tensors="pt")
        input_ids = enc["input_ids"].to(self.device)
        attention = enc["attention_mask"].to(self.device)
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new,
            "pad_token_id": self.tokenizer.pad_token_id,
            "attention_mask": attention,
        }
        if params.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=params.temperature, top_p=params.top_p)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        devices = [self.device] if self.device.startswith("cuda") else []
        with self._gen_lock, torch.inference_mode(), torch.random.fork_rng(devices=devices):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = self.model.generate(input_ids=input_ids, **kwargs)
            self.batches_run += 1
        new = out[:, input_ids.shape[1] :].tolist()
        results: list[list[Completion]] = []
        r = 0
        for job in jobs:
            comps = []
            for _ in range(job.params.n):
                comps.append(self._finish(new[r], job))
                r += 1
            results.append(comps)
        return results

    def _finish(self, ids: list[int], job: _Job) -> Completion:
        """Turn one generated row into a Completion: cut at EOS/padding, decode, cut at a stop string."""
        stops = self._eos_ids | {self.tokenizer.pad_token_id}
        end = next((i for i, t in enumerate(ids) if t in stops), None)
        hit_eos = end is not None and ids[end] in self._eos_ids
        kept = ids if end is None else ids[:end]
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        text, matched = apply_stop(text, job.params.stop)
        if matched is not None or hit_eos:
            reason = "stop"
        elif len(kept) >= job.max_new:
            reason = "length"
        else:
            reason = "stop"
        return Completion(
            text=text,
            finish_reason=reason,
            stop_sequence=matched,
            prompt_tokens=len(job.prompt_ids),
            completion_tokens=len(kept) + (1 if hit_eos else 0),
        )

    async def aclose(self) -> None:
        if self._drainer is not None and not self._drainer.done():
            with contextlib.suppress(asyncio.CancelledError):
                await self._drainer
        self.model = None  # type: ignore[assignment]
        gc.collect()
        torch = self._torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _resolve_device(torch: Any, device: str) -> str:
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelSpecError(f"device {device!r} requested but CUDA is not available")
    try:
        torch.device(device)
    except RuntimeError as e:
        raise ModelSpecError(f"bad device {device!r}: {e}") from None
    return device


def _resolve_dtype(torch: Any, dtype: str, device: str) -> Any:
    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, dtype)


def _dtype_kwarg_is_new(transformers: Any) -> bool:
    """transformers >= 4.56 names ``from_pretrained``'s dtype argument ``dtype`` (``torch_dtype`` before)."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return (major, minor) >= (4, 56)


def _eos_ids(model: Any, tok: Any) -> set[int]:
    ids: set[int] = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (gen_eos, tok.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(v for v in value if isinstance(v, int))
    return ids
