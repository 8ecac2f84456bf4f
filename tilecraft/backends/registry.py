"""The backends the runtime knows: one `BackendSpec` per name, registered in backends/__init__.py.

The runtime never names a backend: it picks one by the name a launch asks for, or as the default
for the device its arrays live on, and asks the spec for everything else.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from ..version import __version__
from .base import Backend

CPU, CUDA = "cpu", "cuda"  # where a launch's arrays live: NumPy arrays and CPU tensors, or CUDA tensors


@dataclass(frozen=True)
class BackendSpec:
    """How the runtime knows one backend.

    name: what `launch(backend=...)` and TILECRAFT_BACKEND take.
    device: where its arrays live (CPU or CUDA); launches with arrays elsewhere are refused.
    make: builds the Backend, once, at the first launch that needs it (see `lazy`).
    to_array: one array argument (a NumPy array or a torch tensor) as the backend takes it.
    packages: distributions whose versions join tilecraft's in the compile-cache key.
    default: chosen for arrays on `device` when a launch asks for no backend.
    """

    name: str
    device: str
    make: Callable[[], Backend]
    to_array: Callable[[Any], Any]
    packages: tuple[str, ...] = ()
    default: bool = False

    @cached_property
    def backend(self) -> Backend:
        return self.make()

    @cached_property
    def version(self) -> str:
        """tilecraft's version and those of `packages`: part of the compile-cache key."""
        return " ".join([f"tilecraft-{__version__}", *(f"{p}-{_dist_version(p)}" for p in self.packages)])


def _dist_version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def lazy(path: str, *args: Any) -> Callable[[], Backend]:
    """A `make` that imports `path` ('.module:Class', relative to tilecraft.backends) only when
    the backend is first needed, and calls it with `args`."""
    module, _, attr = path.partition(":")
    return lambda: getattr(importlib.import_module(module, __package__), attr)(*args)


_specs: dict[str, BackendSpec] = {}


def register(spec: BackendSpec) -> BackendSpec:
    """Make `spec` known by its name; a device has at most one default backend."""
    if spec.name in _specs:
        raise ValueError(f"A backend named {spec.name!r} is already registered")
    if spec.default and any(s.default and s.device == spec.device for s in _specs.values()):
        raise ValueError(f"{spec.device} arrays already have a default backend ({default_for(spec.device).name})")
    _specs[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    del _specs[name]


def get(name: str) -> BackendSpec | None:
    return _specs.get(name)


def all() -> tuple[BackendSpec, ...]:  # noqa: A001 (registry.all(), as the other accessors)
    """Every registered backend, in registration order."""
    return tuple(_specs.values())


def default_for(device: str) -> BackendSpec:
    """The backend launches with arrays on `device` get when they ask for none."""
    for spec in _specs.values():
        if spec.default and spec.device == device:
            return spec
    raise LookupError(f"No backend is the default for {device} arrays; pass backend=...")
