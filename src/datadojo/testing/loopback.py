"""``loopback:NAME`` model specs: a recipe's teacher or judge played by a scripted fake on a local port.

Why: the bundled examples' small variants (``examples/recipes/*-small.toml``) must run as shipped, with no
model server. Their ``[models]`` name a loopback model (``teacher = "loopback:datamind-teacher"``); the
``datadojo recipe`` command serves each one with :class:`~datadojo.testing.server.ScriptedLLMServer` for
the length of the command and hands the recipe an ordinary ``openai:loopback-NAME@http://127.0.0.1:PORT/v1``
spec, so every request goes through the real OpenAI client, retries, usage ledgers and failure policy.
The stage keys see the spec without its URL (:func:`datadojo.recipes.config.model_identity`), so a rerun on
another port finds the stages cached.

The fakes are the pipelines' own test doubles (:data:`LOOPBACK_MODELS`): they script what a teacher writes,
not what a good model would; a run on them tests that every stage carries data to the next, not learning.
The recipe library never imports this package; from Python::

    with serve_loopback(load_recipe("examples/recipes/datamind-small.toml")) as config:
        run(config)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from datadojo.config import ConfigError
from datadojo.recipes.config import RecipeConfig
from datadojo.testing import datamind_teacher
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

__all__ = ["LOOPBACK", "LOOPBACK_MODELS", "is_loopback", "serve_loopback"]

#: The prefix of a loopback model spec.
LOOPBACK = "loopback:"

#: Loopback model name → what makes its script (one script per served model; a stateful one is made anew
#: for each command): DataMind's teacher and judge (:mod:`datadojo.testing.datamind_teacher`), and
#: SciDataSailor's policy and judges in one (:class:`datadojo.testing.sailor_teacher.FakeSailor`).
LOOPBACK_MODELS: dict[str, Callable[[], Any]] = {
    "datamind-teacher": lambda: datamind_teacher.teacher,
    "datamind-judge": lambda: datamind_teacher.judge,
    "sailor": FakeSailor,
}

ROLES = ("teacher", "judge")


def is_loopback(spec: str | None) -> bool:
    """Whether a model spec names a loopback model (``loopback:NAME``)."""
    return bool(spec) and str(spec).startswith(LOOPBACK)


def _name(role: str, spec: str) -> str:
    name = spec.removeprefix(LOOPBACK)
    if name not in LOOPBACK_MODELS:
        raise ConfigError(
            f"models.{role} = {spec!r}: no loopback model {name!r}; one of "
            + ", ".join(f"{LOOPBACK}{n}" for n in LOOPBACK_MODELS)
        )
    return name


@contextmanager
def serve_loopback(config: RecipeConfig) -> Iterator[RecipeConfig]:
    """Serve each ``loopback:NAME`` model of ``config`` on a local port while the block runs; yield the
    config with those specs replaced by their ``openai:`` specs (a config without one comes back as it is).
    Roles naming the same loopback model share one server (SciDataSailor's policy and judges)."""
    wanted = {r: getattr(config.models, r) for r in ROLES if is_loopback(getattr(config.models, r))}
    if not wanted:
        yield config
        return
    with ExitStack() as stack:
        urls: dict[str, str] = {}
        for role, spec in wanted.items():
            name = _name(role, spec)
            if name not in urls:
                server = stack.enter_context(ScriptedLLMServer(LOOPBACK_MODELS[name]()))
                urls[name] = server.base_url
        served = {r: f"openai:loopback-{_name(r, s)}@{urls[_name(r, s)]}" for r, s in wanted.items()}
        models = config.models.model_copy(update=served)
        yield config.model_copy(update={"models": models})
