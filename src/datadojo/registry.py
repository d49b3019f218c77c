"""Things by name: the one registry behind benchmarks, download sources, policy losses and dialects.

Each registry maps a case-insensitive name to a value, refuses to re-register a taken name unless asked
(so a plugin cannot silently replace a built-in), and answers an unknown name with
:class:`~datadojo.errors.UnknownNameError`, whose message lists the known names -- the same error and the
same wording everywhere, and one line from the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from datadojo.errors import UnknownNameError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Values of one ``kind`` (``"benchmark"``, ``"policy loss"``) by case-insensitive name.

    ``aliases`` maps other names to registered ones; ``listing`` is the word before the known names in the
    unknown-name message (``known`` or ``registered``).
    """

    def __init__(
        self, kind: str, *, aliases: Mapping[str, str] | None = None, listing: str = "known"
    ) -> None:
        self.kind = kind
        self.listing = listing
        self._items: dict[str, T] = {}
        self._aliases = {k.lower(): v.lower() for k, v in (aliases or {}).items()}

    def key(self, name: str) -> str:
        """The registry key of ``name`` (lower case, aliases resolved)."""
        low = name.lower()
        return self._aliases.get(low, low)

    def register(self, name: str, value: T, *, replace: bool = False) -> T:
        """Add ``value`` as ``name``; a name taken by another value needs ``replace=True``."""
        key = self.key(name)
        if key in self._items and not replace and self._items[key] is not value:
            raise ValueError(f"a {self.kind} named {name!r} is already registered; pass replace=True")
        self._items[key] = value
        return value

    def get(self, name: str) -> T:
        """The value registered as ``name``; :class:`UnknownNameError` lists the known names."""
        try:
            return self._items[self.key(name)]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; {self.listing}: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.key(name) in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
