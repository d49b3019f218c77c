"""Token-level episodes: DataDojo's ReAct loop run token-in / token-out, the one module every trainer shares.

Why: a trainer that re-tokenizes a multi-turn rollout from its text trains on tokens the sampler never
produced (BPE merges across a turn boundary, a stop string cut mid-token, a template that renders a reply
differently), and the sampler's log-probs no longer line up with the trainer's. Here the sequence *is* the
sampler's: every generation call sends the token ids accumulated so far, the generated ids are appended
unchanged (mask 1, with their log-probs), and only the environment's part — what closes the assistant turn
and opens the next one around the observation — is tokenized, once, and appended with mask 0
(DataMind §4: "any tokens emitted by the environment are discarded when computing the objective").

:class:`TokenEpisodeBackend` is a :class:`~datadojo.llm.ChatBackend` over a token generator, so
:func:`datadojo.agent.run_agent` — dialect parsing, stop strings, the persistent sandbox of one trajectory,
invalid-turn feedback — runs unchanged on top of it. A generator is any ``async (prompt_ids,
sampling) -> GenOutput``: verl's ``AsyncLLMServerManager.generate`` (:mod:`datadojo.train.export.verl_agent`),
an OpenAI-compatible ``/v1/completions`` endpoint with token-id prompts (:func:`openai_completions_generate`;
vLLM and SGLang), or a transformers model in process (:func:`hf_generate`, TRL's adapter and tests).

The environment's tokens are the chat template's own rendering: with ``T(m)`` the template's text of
messages ``m``, the bridge after a reply is (what the reply lacks of its final text) + (``T(m + [a])``
after ``a``'s content: the end-of-turn marker, minus one the model generated itself) + (``T(m + [a, u],
generation prompt) − T(m + [a])``: the observation turn and the next assistant header). The template must
be prefix-stable (``docs/training.md``); one that is not raises :class:`EpisodeError`.

Infrastructure failures — the server (``llm_error``) or the sandbox (``env_error``) — are marked
(:attr:`EpisodeResult.infra_failure`): trainers drop them from the group's advantage statistics and the
loss instead of scoring them 0, which would teach the policy that a crashed sandbox was its fault.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.llm.base import ChatBackend, Completion, LLMError, Message, SamplingParams, TokenLogprob

__all__ = [
    "INFRA_STOP_REASONS",
    "EpisodeError",
    "EpisodeResult",
    "GenOutput",
    "Generate",
    "TokenEpisode",
    "TokenEpisodeBackend",
    "hf_generate",
    "openai_completions_generate",
    "run_token_episode",
    "sampling_dict",
]

#: Trajectory stop reasons that are the infrastructure's fault, not the policy's.
INFRA_STOP_REASONS = frozenset({"llm_error", "env_error"})


class EpisodeError(DataDojoError, ValueError):
    """A token episode that cannot be built: an unstable chat template, messages that rewrite history, or
    a generator reply of the wrong shape. The message names the turn."""


@dataclass
class GenOutput:
    """One generation: the sampled token ids, their log-probs (None when the engine gave none), and why it
    stopped (``completed``, ``length``, ``aborted`` or None)."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    stop_reason: str | None = None


Generate = Callable[[list[int], dict[str, Any]], Awaitable[GenOutput]]


@dataclass
class TokenEpisode:
    """The token record of one trajectory: ``prompt_ids`` then ``response_ids`` with a mask and log-probs.

    ``response_mask[i]`` is 1 for a token the policy sampled and 0 for an environment token;
    ``response_logprobs[i]`` is the sampler's log-prob of a sampled token (0.0 on environment tokens, and
    on every token when the sampler returned none: then ``has_logprobs`` is False). ``turns`` holds the
    ``(start, end)`` response offsets of each generation.
    """

    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    turns: list[tuple[int, int]] = field(default_factory=list)
    has_logprobs: bool = True

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def loss_mask(self) -> list[int]:
        """Per position of :attr:`input_ids` (the trainers' :class:`TokenizedTrajectory` convention)."""
        return [0] * len(self.prompt_ids) + self.response_mask

    @property
    def rollout_logprobs(self) -> list[float]:
        """Aligned with the *predicted* tokens ``input_ids[1:]`` (what the losses take)."""
        return ([0.0] * len(self.prompt_ids) + self.response_logprobs)[1:]

    def add_generated(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        start = len(self.response_ids)
        self.response_ids += list(ids)
        self.response_mask += [1] * len(ids)
        if logprobs is None:
            self.has_logprobs = False
            self.response_logprobs += [0.0] * len(ids)
        else:
            if len(logprobs) != len(ids):
                raise EpisodeError(
                    f"turn {len(self.turns) + 1}: {len(ids)} tokens but {len(logprobs)} log-probs"
                )
            self.response_logprobs += [float(x) for x in logprobs]
        self.turns.append((start, len(self.response_ids)))

    def add_environment(self, ids: Sequence[int]) -> None:
        self.response_ids += list(ids)
        self.response_mask += [0] * len(ids)
        self.response_logprobs += [0.0] * len(ids)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenEpisode:
        ep = cls(**{k: v for k, v in data.items() if k != "turns"})
        ep.turns = [tuple(t) for t in data.get("turns", [])]  # type: ignore[misc]
        n = len(ep.response_ids)
        if len(ep.response_mask) != n or len(ep.response_logprobs) != n:
            raise EpisodeError(
                f"token episode: {n} response ids, {len(ep.response_mask)} mask values, "
                f"{len(ep.response_logprobs)} log-probs"
            )
        return ep


def sampling_dict(params: SamplingParams, stop: Sequence[str]) -> dict[str, Any]:
    """``SamplingParams`` as the engines' sampling dict (vLLM / SGLang names), log-probs always asked for."""
    out: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p, "logprobs": True}
    if params.max_tokens is not None:
        out["max_tokens"] = params.max_tokens
    if params.seed is not None:
        out["seed"] = params.seed
    if stop:
        out["stop"] = list(stop)
    return out


class TokenEpisodeBackend(ChatBackend):
    """A one-trajectory :class:`ChatBackend` that keeps the :class:`TokenEpisode` (module docstring).

    The agent loop calls :meth:`chat` with the whole conversation each turn; the messages already sent must
    come back unchanged (the loop only appends). ``max_context`` caps prompt + reply tokens (the loop then
    stops with ``context_limit``). Stop strings are applied here on the decoded text when the generator
    does not apply them itself: the reply keeps the sampled ids up to the token that completes the stop
    string (the model did sample it) and nothing after.
    """

    def __init__(
        self,
        generate: Generate,
        tokenizer: Any,
        *,
        model_id: str = "token-episode",
        max_context: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(model_id=model_id, context_window=max_context)
        self._gen = generate
        self.tokenizer = tokenizer
        self.template_kwargs = dict(chat_template_kwargs or {})
        self.episode = TokenEpisode()
        self._sent: list[Message] = []
        self._last_closed = False  # the last generation ended with the end-of-turn token

    # ------------------------------------------------------------------ template arithmetic

    def _render(self, messages: Sequence[Message], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            [{"role": m["role"], "content": m["content"]} for m in messages],
            tokenize=False,
            add_generation_prompt=generation_prompt,
            **self.template_kwargs,
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def _bridge(self, messages: Sequence[Message]) -> list[int]:
        """Environment tokens between the last generation and the next one (module docstring)."""
        n_sent = len(self._sent)
        if not self._sent:
            return self._encode(self._render(messages, True))
        turn = len(self.episode.turns)
        for i, (old, new) in enumerate(zip(self._sent, messages, strict=False)):
            if old.get("role") != new.get("role") or old.get("content") != new.get("content"):
                raise EpisodeError(
                    f"turn {turn + 1}: message {i} changed after it was sent (history rewritten)"
                )
        if len(messages) < n_sent + 2 or messages[n_sent].get("role") != "assistant":
            raise EpisodeError(
                f"turn {turn + 1}: expected the assistant reply then the observation after {n_sent} messages"
            )
        reply = str(messages[n_sent]["content"])
        with_reply = self._render(messages[: n_sent + 1], False)
        full = self._render(messages, True)
        if not full.startswith(with_reply):
            raise EpisodeError(
                f"turn {turn + 1}: the chat template is not prefix-stable (rendering the observation rewrote "
                "the reply); token-exact rollouts need a template that keeps earlier turns as rendered"
            )
        at = with_reply.rfind(reply)
        if at < 0:
            raise EpisodeError(f"turn {turn + 1}: the template does not render the reply's text verbatim")
        suffix = with_reply[at + len(reply) :]
        start, end = self.episode.turns[-1]
        generated = self.tokenizer.decode(self.episode.response_ids[start:end], skip_special_tokens=True)
        missing = reply[len(generated) :] if reply.startswith(generated) else ""
        eot = self.tokenizer.eos_token or ""
        if self._last_closed and eot and suffix.startswith(eot):
            suffix = suffix[len(eot) :]
        return self._encode(missing + suffix + full[len(with_reply) :])

    def count_tokens(self, messages: Sequence[Message]) -> int:
        try:
            return len(self.episode.input_ids) + len(self._bridge(messages))
        except EpisodeError:
            return len(self.episode.input_ids)

    # ------------------------------------------------------------------ generation

    def _cut_at_stop(self, ids: list[int], stop: Sequence[str]) -> tuple[int, str, str | None]:
        """(ids kept, visible text before the stop, matched stop) for the earliest stop string."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        best: tuple[int, str] | None = None
        for s in stop:
            i = text.find(s)
            if i >= 0 and (best is None or i < best[0]):
                best = (i, s)
        if best is None:
            return len(ids), text, None
        i, s = best
        for k in range(1, len(ids) + 1):  # the shortest prefix whose text contains the stop string
            if len(self.tokenizer.decode(ids[:k], skip_special_tokens=True)) >= i + len(s):
                return k, text[:i], s
        return len(ids), text[:i], s

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        if params.n != 1:
            raise EpisodeError("a token episode is one trajectory: n must be 1")
        bridge = self._bridge(messages)
        if not self._sent:
            self.episode.prompt_ids = bridge
        else:
            self.episode.add_environment(bridge)
        self._sent = [dict(m) for m in messages]
        prompt = self.episode.input_ids
        sampling = sampling_dict(params, params.stop)
        try:
            out = await self._gen(list(prompt), sampling)
        except LLMError:
            raise
        except Exception as exc:  # the engine's own failure: the loop records llm_error (infra)
            raise LLMError(f"token generator failed: {type(exc).__name__}: {exc}", retryable=True) from exc
        if out.stop_reason == "aborted":
            raise LLMError("the generation was aborted by the engine", retryable=True)
        ids = list(out.token_ids)
        if out.log_probs is not None and len(out.log_probs) != len(ids):
            raise EpisodeError(
                f"turn {len(self.episode.turns) + 1}: generator returned {len(ids)} tokens and "
                f"{len(out.log_probs)} log-probs"
            )
        keep, text, matched = self._cut_at_stop(ids, params.stop)
        ids = ids[:keep]
        lps = None if out.log_probs is None else list(out.log_probs[:keep])
        eos = self.tokenizer.eos_token_id
        self._last_closed = bool(ids) and ids[-1] == eos and matched is None
        if matched is not None or self._last_closed:
            reason = "stop"
        elif out.stop_reason == "length" or (params.max_tokens is not None and len(ids) >= params.max_tokens):
            reason = "length"
        else:
            reason = "stop"
        self.episode.add_generated(ids, lps)
        token_lps = None
        if lps is not None:
            token_lps = tuple(
                TokenLogprob(self.tokenizer.convert_ids_to_tokens(t), lp)
                for t, lp in zip(ids, lps, strict=True)
            )
        return [
            Completion(
                text=text,
                finish_reason=reason,
                stop_sequence=matched,
                prompt_tokens=len(prompt),
                completion_tokens=len(ids),
                logprobs=token_lps,
            )
        ]


@dataclass
class EpisodeResult:
    """A trajectory, its token record, and whether it ended on an infrastructure failure."""

    trajectory: Any
    episode: TokenEpisode

    @property
    def infra_failure(self) -> bool:
        return self.trajectory.stop_reason in INFRA_STOP_REASONS


async def run_token_episode(
    task: Any,
    generate: Generate,
    tokenizer: Any,
    sandbox: Any,
    config: Any = None,
    *,
    sample: int = 0,
    seed: int | None = None,
    max_context: int | None = None,
    model_id: str = "token-episode",
) -> EpisodeResult:
    """Run one episode of ``task`` token-in / token-out with ``sandbox`` (kept for the whole trajectory).

    ``config`` is an :class:`~datadojo.agent.AgentConfig`. The trajectory's ``extra["tokens"]`` holds the
    :class:`TokenEpisode` as a dict, so a JSONL of rollouts carries its exact tokens.
    """
    from datadojo.agent import run_agent

    backend = TokenEpisodeBackend(generate, tokenizer, model_id=model_id, max_context=max_context)
    traj = await run_agent(task, backend, sandbox, config, sample=sample, seed=seed)
    traj = traj.model_copy(update={"extra": {**traj.extra, "tokens": backend.episode.to_dict()}})
    return EpisodeResult(traj, backend.episode)


# --------------------------------------------------------------------------------------------- generators


def hf_generate(model: Any, *, eos_token_id: int | None = None) -> Generate:
    """A generator over a transformers causal LM in this process (sampling with the request's temperature /
    top-p / max_tokens; log-probs of the sampled tokens under the sampling distribution's logits)."""
    import torch

    async def generate(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        device = next(model.parameters()).device
        ids = torch.tensor([prompt_ids], device=device)
        temperature = float(sampling.get("temperature", 1.0))
        kwargs: dict[str, Any] = {
            "max_new_tokens": int(sampling.get("max_tokens") or 64),
            "do_sample": temperature > 0,
            "output_scores": True,
            "return_dict_in_generate": True,
            "pad_token_id": model.generation_config.pad_token_id,
            "eos_token_id": eos_token_id
            if eos_token_id is not None
            else model.generation_config.eos_token_id,
        }
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=float(sampling.get("top_p", 1.0)), top_k=0)
        if sampling.get("seed") is not None:
            torch.manual_seed(int(sampling["seed"]))
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        new = out.sequences[0, len(prompt_ids) :].tolist()
        lps = []
        for step, tok in enumerate(new):
            logits = out.scores[step][0].float()
            lps.append(float(torch.log_softmax(logits, -1)[tok]))
        finished = bool(new) and new[-1] == kwargs["eos_token_id"]
        return GenOutput(new, lps, "completed" if finished else "length")

    return generate


def openai_completions_generate(base_url: str, model: str, *, timeout_s: float = 600.0) -> Generate:
    """A generator over an OpenAI-compatible ``/v1/completions`` endpoint with a token-id prompt.

    vLLM (``return_token_ids``, ≥ 0.10.2) and SGLang accept ``prompt`` as a list of ids; the reply's
    ``choices[0].token_ids`` are the sampled ids and ``logprobs.token_logprobs`` their log-probs. Without
    ``token_ids`` the ids are read from ``logprobs.tokens`` written as ``token_id:N`` (vLLM's
    ``return_tokens_as_token_ids``); a reply with neither cannot be token-exact and raises
    :class:`EpisodeError`.
    """
    import asyncio

    url = base_url.rstrip("/") + "/completions"

    def call(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        body = {
            "model": model,
            "prompt": prompt_ids,
            "temperature": sampling.get("temperature", 1.0),
            "top_p": sampling.get("top_p", 1.0),
            "max_tokens": sampling.get("max_tokens", 1024),
            "logprobs": 1,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        for k in ("seed", "stop"):
            if k in sampling:
                body[k] = sampling[k]
        req = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                data = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise LLMError(f"{url}: {exc}", retryable=True) from exc
        return parse_completion_choice(data["choices"][0], where=url)

    async def generate(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        return await asyncio.to_thread(call, prompt_ids, sampling)

    return generate


def _token_id(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith("token_id:"):
        try:
            return int(token[len("token_id:") :])
        except ValueError:
            return None
    return None


def parse_completion_choice(choice: dict[str, Any], *, where: str = "reply") -> GenOutput:
    """Token ids and log-probs of one completions / chat-completions choice (vLLM / SGLang shapes)."""
    lp = choice.get("logprobs") or {}
    logprobs: list[float] | None = None
    tokens: list[Any] = []
    if isinstance(lp.get("token_logprobs"), list):  # /v1/completions
        logprobs = [float(x) for x in lp["token_logprobs"]]
        tokens = list(lp.get("tokens") or [])
    elif isinstance(lp.get("content"), list):  # /v1/chat/completions
        logprobs = [float(x["logprob"]) for x in lp["content"]]
        tokens = [x.get("token") for x in lp["content"]]
    ids = choice.get("token_ids")
    if not isinstance(ids, list):
        parsed = [_token_id(t) for t in tokens]
        if not tokens or any(p is None for p in parsed):
            raise EpisodeError(
                f"{where}: the reply carries no token ids (ask vLLM for return_token_ids or "
                "return_tokens_as_token_ids); a token-exact rollout cannot be rebuilt from text"
            )
        ids = parsed
    if logprobs is not None and len(logprobs) != len(ids):
        logprobs = None
    reason = choice.get("finish_reason")
    return GenOutput([int(i) for i in ids], logprobs, "length" if reason == "length" else "completed")
