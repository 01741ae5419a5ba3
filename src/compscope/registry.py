"""One way to register things: measures, metrics, formats, families, built-in models, commands.

A :class:`Registry` maps names to entries, in registration order. An entry is registered
where it is defined (``REG.add(name, obj)`` or ``@REG.register(name)``), or, when defining
it would import something heavy, *lazily* as ``"module:attribute"`` (``REG.lazy(name,
target)``), imported on first use. ``"all"`` always means every registered name, and an
unknown name is an error that lists the registered ones. This module imports nothing heavy.

>>> shapes = Registry("shape")
>>> _ = shapes.add("square", 4)
>>> shapes.get("square"), shapes.names()
(4, ['square'])
>>> shapes.get("circle")
Traceback (most recent call last):
...
compscope.errors.OptionError: unknown shape 'circle'; shapes: square
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from .errors import CompscopeError, OptionError, did_you_mean

T = TypeVar("T")


class _Lazy:
    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target

    def resolve(self):
        module, _, attr = self.target.partition(":")
        obj = importlib.import_module(module)
        return getattr(obj, attr) if attr else obj


class Registry(Generic[T]):
    """Named entries of one kind ``what`` (used in messages: "unknown {what} ...")."""

    def __init__(self, what: str, plural: str | None = None, error: type[CompscopeError] = OptionError) -> None:
        self.what, self.plural, self.error = what, plural or f"{what}s", error
        self._entries: dict[str, T | _Lazy] = {}

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` (a name registered twice keeps its place, new entry)."""
        if not isinstance(name, str) or not name or name == "all":
            raise ValueError(f"{self.what} name {name!r}: a non-empty string other than 'all'")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""
        return lambda entry: self.add(name, entry)

    def lazy(self, name: str, target: str) -> None:
        """Register ``"module:attribute"``, imported the first time the entry is wanted."""
        self.add(name, _Lazy(target))

    def get(self, name: str) -> T:
        """The entry ``name``; an error listing the registered names when there is none."""
        if not isinstance(name, str) or name not in self._entries:
            raise self.error(f"unknown {self.what} {name!r}; {self.plural}: {', '.join(self._entries)}"
                             + did_you_mean(name, self._entries))
        entry = self._entries[name]
        if isinstance(entry, _Lazy):
            entry = self._entries[name] = entry.resolve()
        return entry

    def names(self) -> list[str]:
        return list(self._entries)

    def select(self, names: str | Iterable[str]) -> list[str]:
        """``'all'`` (alone or among others) as every registered name, one name, or several;
        each checked, order kept, repeats dropped."""
        if not isinstance(names, str) and not hasattr(names, "__iter__"):
            raise self.error(f"{self.plural}: expected a name or a list of names, got {type(names).__name__}")
        names = [names] if isinstance(names, str) else list(names)
        if "all" in names:
            return self.names()
        if not names:
            raise self.error(f"no {self.what} given; {self.plural}: {', '.join(self._entries)}")
        for n in names:
            self.get(n)
        return list(dict.fromkeys(names))

    def items(self) -> list[tuple[str, T]]:
        return [(n, self.get(n)) for n in self._entries]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what}: {', '.join(self._entries)})"


def submodules(package: str) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: its submodules as attributes, imported on first
    use (``compscope.data.intervene`` after ``import compscope``)."""

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
