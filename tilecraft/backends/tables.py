"""Per-backend tables of the sub-kinds of op families (each UnaryFn, BinaryFn, ... member), kept
complete: a table lacking a member fails when its module is imported, naming what is missing."""

from __future__ import annotations

import enum
from typing import Any, Mapping, TypeVar

E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T", bound=Mapping)


class KindTables:
    """One backend's tables by sub-kind enum; calling it registers and checks one table."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.tables: dict[type[enum.Enum], Mapping[Any, Any]] = {}

    def __call__(self, kind: type[E], table: T) -> T:
        """Record `table` as the backend's handling of every member of `kind`; ImportError
        naming the members it lacks."""
        missing = [member.name for member in kind if member not in table]
        if missing:
            raise ImportError(f"the {self.backend} has no entry for {kind.__name__} {', '.join(missing)}")
        assert kind not in self.tables, f"two {self.backend} tables for {kind.__name__}"
        self.tables[kind] = table
        return table
