"""Token-level episodes: DataDojo's ReAct loop run token-in / token-out, the one module every trainer shares.

Why: a trainer that re-tokenizes a multi-turn rollout from its text trains on tokens the sampler never
produced (BPE merges across a turn boundary, a stop string cut mid-token, a template that renders a reply
differently), and the sampler's log-probs no longer line up with the trainer's. Here the sequence *is* the
sampler's: every generation call sends the token ids accumulated so far, the generated ids are appended
unchanged (mask 1, with their log-probs), and only the environment's part — what closes the assistant turn
and opens the next one around the observation — is tokenized, once, and appended with mask 0
(DataMind §4: "any tokens emitted by the environment are discarded when computing the objective").

Two ways to drive it, one arithmetic (:class:`TokenBridge`): :class:`TokenEpisodeBackend` is a
:class:`~datadojo.llm.ChatBackend` over a token generator, so :func:`datadojo.env.run_agent` — the episode's
dialect parsing, stop strings, persistent sandbox, invalid-turn feedback — runs unchanged on top of it
(:func:`run_token_episode`); :class:`TokenStepper` hands the generation to a trainer that samples itself:
prompt ids out, sampled ids and log-probs in, observation ids out, until the episode ends. A generator is any ``async (prompt_ids,
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
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from datadojo.env.drive import run_episode
from datadojo.env.episode import Episode, StepResult
from datadojo.errors import DataDojoError
from datadojo.llm.base import ChatBackend, Completion, LLMError, Message, SamplingParams, TokenLogprob
from datadojo.types import TokenUsage

__all__ = [
    "INFRA_STOP_REASONS",
    "EpisodeError",
    "EpisodeResult",
    "GenOutput",
    "Generate",
    "TokenBridge",
    "TokenEpisode",
    "TokenEpisodeBackend",
    "TokenStep",
    "TokenStepper",
    "hf_generate",
    "openai_completions_generate",
    "play_token_episode",
    "run_token_episode",
    "sampling_dict",
]

#: The error of an episode whose generation the engine aborted (an infrastructure failure, ``llm_error``).
ABORTED = "the generation was aborted by the engine"

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


class TokenBridge:
    """The template arithmetic of a token-exact episode (module docstring), shared by
    :class:`TokenEpisodeBackend` (a chat backend for :func:`~datadojo.env.run_agent`) and
    :class:`TokenStepper` (a trainer stepping the episode itself).

    It keeps the :class:`TokenEpisode` (:attr:`record`) and the messages already turned into tokens; the
    messages sent next must extend them unchanged (the episode only appends).
    """

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = dict(chat_template_kwargs or {})
        self.record = TokenEpisode()
        self.sent: list[Message] = []
        self.last_closed = False  # the last generation ended with the end-of-turn token

    def _render(self, messages: Sequence[Message], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            [{"role": m["role"], "content": m["content"]} for m in messages],
            tokenize=False,
            add_generation_prompt=generation_prompt,
            **self.template_kwargs,
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []

    def bridge(self, messages: Sequence[Message]) -> list[int]:
        """Environment tokens between the last generation and the next one (module docstring): the whole
        prompt before the first generation."""
        n_sent = len(self.sent)
        if not self.sent:
            return self._encode(self._render(messages, True))
        turn = len(self.record.turns)
        for i, (old, new) in enumerate(zip(self.sent, messages, strict=False)):
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
        start, end = self.record.turns[-1]
        generated = self.tokenizer.decode(self.record.response_ids[start:end], skip_special_tokens=True)
        missing = reply[len(generated) :] if reply.startswith(generated) else ""
        eot = self.tokenizer.eos_token or ""
        if self.last_closed and eot and suffix.startswith(eot):
            suffix = suffix[len(eot) :]
        return self._encode(missing + suffix + full[len(with_reply) :])

    def commit(self, messages: Sequence[Message], ids: Sequence[int]) -> None:
        """Append ``ids`` (:meth:`bridge` of ``messages``) to the record: the prompt, or environment tokens."""
        if not self.sent:
            self.record.prompt_ids = list(ids)
        else:
            self.record.add_environment(ids)
        self.sent = [dict(m) for m in messages]

    def count_tokens(self, messages: Sequence[Message]) -> int:
        try:
            return len(self.record.input_ids) + len(self.bridge(messages))
        except EpisodeError:
            return len(self.record.input_ids)

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

    def add_generation(
        self,
        token_ids: Sequence[int],
        log_probs: Sequence[float] | None,
        stop: Sequence[str],
        *,
        engine_stop_reason: str | None = None,
        max_tokens: int | None = None,
    ) -> tuple[str, str, str | None, list[int], list[float] | None]:
        """Record one generation; ``(text, finish_reason, matched stop, ids kept, log-probs kept)``.

        Stop strings are applied here on the decoded text when the engine does not apply them itself: the
        reply keeps the sampled ids up to the token that completes the stop string (the model did sample
        it) and nothing after; ``text`` is the reply before the stop string, as a server would return it.
        """
        ids = [int(t) for t in token_ids]
        if log_probs is not None and len(log_probs) != len(ids):
            raise EpisodeError(
                f"turn {len(self.record.turns) + 1}: generator returned {len(ids)} tokens and "
                f"{len(log_probs)} log-probs"
            )
        keep, text, matched = self._cut_at_stop(ids, stop)
        ids = ids[:keep]
        lps = None if log_probs is None else [float(x) for x in log_probs[:keep]]
        eos = self.tokenizer.eos_token_id
        self.last_closed = bool(ids) and ids[-1] == eos and matched is None
        if matched is not None or self.last_closed:
            reason = "stop"
        elif engine_stop_reason == "length" or (max_tokens is not None and len(ids) >= max_tokens):
            reason = "length"
        else:
            reason = "stop"
        self.record.add_generated(ids, lps)
        return text, reason, matched, ids, lps


class TokenEpisodeBackend(ChatBackend):
    """A one-trajectory :class:`ChatBackend` that keeps the :class:`TokenEpisode` (module docstring).

    The agent loop calls :meth:`chat` with the whole conversation each turn; the messages already sent must
    come back unchanged (the loop only appends). ``max_context`` caps prompt + reply tokens (the loop then
    stops with ``context_limit``). Stop strings are applied on the decoded text when the generator does
    not apply them itself (:meth:`TokenBridge.add_generation`).
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
        self.bridge = TokenBridge(tokenizer, chat_template_kwargs)

    @property
    def episode(self) -> TokenEpisode:
        """The token record so far."""
        return self.bridge.record

    @property
    def _sent(self) -> list[Message]:
        return self.bridge.sent

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return self.bridge.count_tokens(messages)

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        if params.n != 1:
            raise EpisodeError("a token episode is one trajectory: n must be 1")
        self.bridge.commit(messages, self.bridge.bridge(messages))
        prompt = self.episode.input_ids
        sampling = sampling_dict(params, params.stop)
        try:
            out = await self._gen(list(prompt), sampling)
        except LLMError:
            raise
        except Exception as exc:  # the engine's own failure: the loop records llm_error (infra)
            raise LLMError(f"token generator failed: {type(exc).__name__}: {exc}", retryable=True) from exc
        if out.stop_reason == "aborted":
            raise LLMError(ABORTED, retryable=True)
        text, reason, matched, ids, lps = self.bridge.add_generation(
            out.token_ids, out.log_probs, params.stop, engine_stop_reason=out.stop_reason,
            max_tokens=params.max_tokens,
        )  # fmt: skip
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

    ``config`` is an :class:`~datadojo.env.EnvConfig`. The driver is :func:`datadojo.env.run_episode` over a
    :class:`TokenEpisodeBackend`. The trajectory's ``extra["tokens"]`` holds the :class:`TokenEpisode` as a
    dict, so a JSONL of rollouts carries its exact tokens.
    """
    backend = TokenEpisodeBackend(generate, tokenizer, model_id=model_id, max_context=max_context)
    episode = await Episode.start(task, sandbox, config, sample=sample, seed=seed, model=model_id)
    return await play_token_episode(episode, backend)


async def play_token_episode(episode: Episode, backend: TokenEpisodeBackend) -> EpisodeResult:
    """Play ``episode`` (from :meth:`datadojo.env.DataEnv.reset`) to its end token-in / token-out with
    ``backend`` (fresh: one per episode), by :func:`datadojo.env.run_episode`; the trajectory carries its
    :class:`TokenEpisode` in ``extra["tokens"]``."""
    traj = await run_episode(episode, backend)
    traj = traj.model_copy(update={"extra": {**traj.extra, "tokens": backend.episode.to_dict()}})
    return EpisodeResult(traj, backend.episode)


# --------------------------------------------------------------------------------------------- stepping


@dataclass(frozen=True)
class TokenStep:
    """What one :meth:`TokenStepper.step` produced: the environment's ids to append before the next
    generation (empty when the episode ended), whether it ended, and the episode's :class:`StepResult`
    (None when no turn was recorded: the engine aborted the generation)."""

    observation_ids: list[int]
    done: bool
    result: StepResult | None


class TokenStepper:
    """An :class:`~datadojo.env.Episode` stepped with token ids, for a trainer that generates itself.

    ``prompt_ids`` (set on construction) is the opening prompt as the chat template renders it; after each
    generation, :meth:`step` takes the sampled ids (and their log-probs) as they came from the sampler and
    returns the ids of the observation turn to append (mask 0), or ``done``. The sampled ids are kept
    verbatim — the reply's text for the episode is decoded from them, never the other way round — and
    :attr:`record` (a :class:`TokenEpisode`) gives ``input_ids``, ``loss_mask`` and ``rollout_logprobs`` at
    the end. The arithmetic is :class:`TokenBridge`'s, the same as :func:`run_token_episode`'s, so both give
    the same record and trajectory for the same sampled ids. ``max_context`` caps prompt + reply tokens: an
    episode whose next request (with :attr:`Episode.max_tokens` of reply) would not fit ends with
    ``context_limit`` (also before the first generation).
    """

    def __init__(
        self,
        episode: Episode,
        tokenizer: Any,
        *,
        max_context: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if episode.turns or episode.done:
            raise EpisodeError(f"task {episode.task.id!r}: a token stepper starts on a fresh episode")
        self.episode = episode
        self.tokenizer = tokenizer
        self.max_context = max_context
        self.bridge = TokenBridge(tokenizer, chat_template_kwargs)
        self._next()

    @property
    def record(self) -> TokenEpisode:
        """The token record so far (``input_ids``, ``loss_mask``, ``rollout_logprobs``)."""
        return self.bridge.record

    @property
    def prompt_ids(self) -> list[int]:
        return self.bridge.record.prompt_ids

    @property
    def done(self) -> bool:
        return self.episode.done

    def sampling(self) -> dict[str, Any]:
        """The engine sampling dict of the next generation (vLLM / SGLang names): the episode's sampling
        settings, its stop strings and the turn's seed — what :func:`run_token_episode` sends."""
        params = self.episode.config.sampling
        seed = self.episode.turn_seed
        params = replace(params, stop=self.episode.stop, seed=params.seed if seed is None else seed)
        return sampling_dict(params, params.stop)

    def _next(self) -> list[int]:
        """The environment ids before the next generation, committed; ends the episode with
        ``context_limit`` (returning ``[]``) when the next request would not fit ``max_context``."""
        messages = self.episode.messages
        ids = self.bridge.bridge(messages)
        max_tokens = self.episode.max_tokens or 0
        if self.max_context is not None:
            count = len(self.bridge.record.input_ids) + len(ids)
            if count + max_tokens > self.max_context:
                self.episode.end(
                    "context_limit",
                    f"the next request ({count} prompt tokens + {max_tokens} for the reply) exceeds the "
                    f"context window of {self.max_context}",
                )
                return []
        self.bridge.commit(messages, ids)
        return ids

    async def step(
        self,
        token_ids: Sequence[int],
        log_probs: Sequence[float] | None = None,
        *,
        stop_reason: str | None = None,
        llm_s: float = 0.0,
    ) -> TokenStep:
        """Play one generation: ``token_ids`` as sampled after :attr:`record`'s ``input_ids``, their
        ``log_probs`` (None: the engine gave none), and the engine's ``stop_reason`` (``completed``,
        ``length``, or ``aborted``: the episode then ends with ``llm_error`` and nothing is recorded)."""
        if stop_reason == "aborted":
            self.episode.end("llm_error", ABORTED)
            return TokenStep([], True, None)
        prompt_len = len(self.bridge.record.input_ids)
        text, reason, matched, ids, _lps = self.bridge.add_generation(
            token_ids, log_probs, self.episode.stop, engine_stop_reason=stop_reason,
            max_tokens=self.episode.max_tokens,
        )  # fmt: skip
        result = await self.episode.step(
            text,
            finish_reason=reason,
            stop_sequence=matched,
            tokens=TokenUsage(prompt=prompt_len, completion=len(ids)),
            llm_s=llm_s,
        )
        if result.done:
            return TokenStep([], True, result)
        ids_next = self._next()
        return TokenStep(ids_next, self.episode.done, result)

    def trajectory(self) -> Any:
        """The finished episode's trajectory with its tokens in ``extra["tokens"]`` (as
        :func:`run_token_episode` records it)."""
        traj = self.episode.trajectory()
        return traj.model_copy(update={"extra": {**traj.extra, "tokens": self.record.to_dict()}})


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
