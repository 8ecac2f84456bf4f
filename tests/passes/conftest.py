"""Fixtures of the pass tests: the backend under test registered again, built with options that
force a derived kernel (split-K parts, operand staging) on every launch."""

from __future__ import annotations

import pytest

from tilecraft.backends import registry
from tilecraft.backends.interpreter import InterpreterBackend


@pytest.fixture
def backend_variant(backend):
    """`make(suffix, **options) -> name`: registers, for this test, `backend` built with `options`
    (InterpreterBackend's for the interpreter, TritonBackend's for a Triton backend)."""
    made = []

    def make(suffix: str, **options) -> str:
        base = registry.get(backend)
        name = f"{backend}-{suffix}"
        if backend == "interpreter":
            build = lambda: InterpreterBackend(**options)  # noqa: E731
        else:
            from tilecraft.backends.triton import TritonBackend
            build = lambda: TritonBackend(base.backend.kind, **options)  # noqa: E731
        registry.register(registry.BackendSpec(name, base.device, build, base.to_array, base.packages))
        made.append(name)
        return name

    yield make
    for name in made:
        registry.unregister(name)


@pytest.fixture
def staged_backend(backend_variant):
    """`backend` (a Triton one) with operand staging forced on every launch (key True), also with
    tensor descriptors forced ("tma"), and with staging off (False): key -> name."""
    return {key: backend_variant(f"staged-{key}", stage_operands=stage, descriptors=tma)
            for key, stage, tma in ((True, True, None), ("tma", True, True), (False, False, None))}
