"""Stage 7: the rule filters of DataMind §3.2 ("Rule-Based Trajectory Filtering"), each with its reason.

1. **format** — the trajectory must follow the ReAct format so it converts losslessly to the training schema:
   the strict validator :func:`datadojo.protocol.validate.validate_trajectory` (tags paired, one action per
   turn, every code block answered by its observation, exactly one final answer, last).
2. **length** — the final answer must be at most ``max_answer_tokens`` = 1,024 tokens (§3.2), counted with
   ``tokenizer``: ``approx`` (:func:`datadojo.llm.base.approx_token_count`, no download) or a Hugging Face
   tokenizer loaded from local files only.
3. **language** — linguistic integrity: no garbled text and no intermingled natural languages. Garbled: the
   replacement character U+FFFD, control characters other than tab / newline / carriage return, or mojibake
   (a word that turns into different valid text when its characters are re-encoded as cp1252 and decoded as
   UTF-8, e.g. ``cafÃ©`` → ``café``). Intermingled languages are looked for only in the agent's prose —
   thoughts and the final answer, with code spans, quoted strings and every word that occurs in the question
   or the data profile removed, since data legitimately holds other scripts. Letters are counted per script
   (Latin, CJK, Cyrillic, …); the prose is intermingled when the letters outside the main script number at
   least ``mixed_script_min_letters`` and at least ``mixed_script_share`` of all letters.

Filters run in this order and a trajectory stops at the first it fails.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from datadojo.llm.base import approx_token_count
from datadojo.protocol.validate import validate_trajectory
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.errors import DataMindError
from datadojo.types import Task, Trajectory

__all__ = [
    "FILTERS",
    "FilterResult",
    "garbled_reason",
    "mixed_language_reason",
    "run_filters",
    "token_counter",
]

FILTERS: tuple[str, ...] = ("format", "length", "language")


@dataclass(frozen=True)
class FilterResult:
    """``passed`` the filters this trajectory got through, in order; ``failed``/``reason`` the one that stopped it."""

    passed: tuple[str, ...]
    failed: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.failed is None


def token_counter(name: str) -> Callable[[str], int]:
    """Token counting for the length filter: ``approx`` or a local Hugging Face tokenizer."""
    if name == "approx":
        return approx_token_count
    return _hf_counter(name)


@functools.lru_cache(maxsize=4)
def _hf_counter(name: str) -> Callable[[str], int]:
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise DataMindError(
            f"tokenizer {name!r} needs transformers (pip install 'datadojo[hf]'), or use 'approx'"
        ) from exc
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception as exc:
        raise DataMindError(f"cannot load the tokenizer {name!r} from local files: {exc}") from exc
    return lambda text: len(tok.encode(text, add_special_tokens=False))


_WORD = re.compile(r"\S+")


def _mojibake(word: str) -> bool:
    if word.isascii():
        return False
    try:
        fixed = word.encode("cp1252").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return False
    return fixed != word


def garbled_reason(text: str) -> str | None:
    """Why ``text`` is garbled (module docstring), or ``None``."""
    if "\ufffd" in text:
        return "replacement character U+FFFD (undecodable bytes)"
    for ch in text:
        if ch not in "\t\n\r" and unicodedata.category(ch) == "Cc":
            return f"control character U+{ord(ch):04X}"
    for m in _WORD.finditer(text):
        if _mojibake(m.group(0)):
            return f"mojibake: {m.group(0)[:30]!r}"
    return None


_SCRIPTS = ("LATIN", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "CYRILLIC", "GREEK", "ARABIC", "HEBREW",
            "DEVANAGARI", "THAI")  # fmt: skip
_CODE_SPAN = re.compile(r"```.*?```|`[^`]*`|<code>.*?</code>", re.DOTALL)
_QUOTED = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|“[^”\n]*”|«[^»\n]*»|「[^」\n]*」")


def _script(ch: str) -> str | None:
    name = unicodedata.name(ch, "")
    for s in _SCRIPTS:
        if name.startswith(s):
            return "CJK" if s in ("HIRAGANA", "KATAKANA") else s
    return "OTHER" if ch.isalpha() else None


def mixed_language_reason(prose: str, vocabulary: set[str], share: float, min_letters: int) -> str | None:
    """Why the agent's ``prose`` intermingles languages (module docstring), or ``None``."""
    text = _QUOTED.sub(" ", _CODE_SPAN.sub(" ", prose))
    counts: Counter[str] = Counter()
    for m in _WORD.finditer(text):
        word = m.group(0).strip(".,;:!?()[]{}<>")
        if not word or word.lower() in vocabulary:
            continue
        for ch in word:
            s = _script(ch)
            if s is not None:
                counts[s] += 1
    total = sum(counts.values())
    if not total or len(counts) < 2:
        return None
    main, _ = counts.most_common(1)[0]
    minority = total - counts[main]
    if minority >= min_letters and minority / total >= share:
        others = ", ".join(f"{s.lower()} {n}" for s, n in counts.most_common() if s != main)
        return f"intermingled scripts in prose: {main.lower()} {counts[main]} letters, {others}"
    return None


def _vocabulary(task: Task | None) -> set[str]:
    if task is None:
        return set()
    text = " ".join([task.question, task.description or ""])
    return {w.strip(".,;:!?()[]{}<>\"'`").lower() for w in text.split()}


def run_filters(
    traj: Trajectory, task: Task | None, config: DataMindConfig, count_tokens: Callable[[str], int]
) -> FilterResult:
    """Apply format, length and language in order; stop at the first failure."""
    problems = validate_trajectory(traj)
    if traj.stop_reason != "answer" and not problems:
        problems = [f"the episode ended with {traj.stop_reason}, not an answer"]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return FilterResult((), "format", problems[0] + more)
    answer = traj.final_answer or ""
    n = count_tokens(answer)
    if n > config.max_answer_tokens:
        return FilterResult(
            ("format",), "length", f"final answer has {n} tokens > {config.max_answer_tokens}"
        )
    prose_parts = [t.thought or "" for t in traj.turns] + [answer]
    for part in [t.raw for t in traj.turns] + [answer]:
        why = garbled_reason(part)
        if why:
            return FilterResult(("format", "length"), "language", why)
    why = mixed_language_reason(
        "\n".join(prose_parts), _vocabulary(task), config.mixed_script_share, config.mixed_script_min_letters
    )
    if why:
        return FilterResult(("format", "length"), "language", why)
    return FilterResult(FILTERS)
