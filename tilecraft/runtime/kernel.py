"""`@ct.kernel`: the kernel object, its options and its per-variant compile cache."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import knobs
from ..backends.base import ArrayFacts, CompiledKernel
from ..backends.registry import BackendSpec
from ..errors import TileArgumentError
from ..frontend import ArgSpec, compile_kernel, param_location
from ..ir import ArrayType, Function, ListType, format_function
from ..passes import optimize
from .args import ArgumentError, ArrayArg, ListArg, ParamInfo, backend_args, describe_args, param_infos
from .cache import default_cache, entry_key
from .fastpath import Keyer, Quick, fast_key, fast_plan, typed_keyer
from .timeout import check_compile_time
from .writes import check_writable, written_params

_UNSPECIFIED = object()
_FAST_LIMIT = 4096


class ByTarget:
    """A per-architecture option value: `ByTarget(sm_90=2, default=1)`."""

    def __init__(self, *, default: Any = _UNSPECIFIED, **by_arch: Any) -> None:
        for key in by_arch:
            if not re.fullmatch(r"sm_\d+", key):
                raise ValueError(f"ByTarget key {key!r} must look like 'sm_<digits>'")
        self.default = default
        self.by_arch = dict(by_arch)

    def resolve(self, arch: str | None, fallback: Any) -> Any:
        if arch in self.by_arch:
            return self.by_arch[arch]
        return fallback if self.default is _UNSPECIFIED else self.default

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByTarget) and (self.default, self.by_arch) == (other.default, other.by_arch)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.by_arch.items())))

    def __repr__(self) -> str:
        items = [f"{k}={v!r}" for k, v in self.by_arch.items()]
        if self.default is not _UNSPECIFIED:
            items.append(f"default={self.default!r}")
        return f"ByTarget({', '.join(items)})"


_OPTION_CHECKS: dict[str, tuple[Any, Callable[[Any], bool], str]] = {
    "num_ctas": (None, lambda v: v is None or (isinstance(v, int) and v in (1, 2, 4, 8, 16)),
                 "a power of two in [1, 16]"),
    "occupancy": (None, lambda v: v is None or (isinstance(v, int) and 1 <= v <= 32), "an int in [1, 32]"),
    "opt_level": (3, lambda v: isinstance(v, int) and 0 <= v <= 3, "an int in [0, 3]"),
    "num_worker_warps": (None, lambda v: v is None or v in (4, 8), "4 or 8"),
}


def _check_options(opts: dict[str, Any]) -> dict[str, Any]:
    out = {k: default for k, (default, _, _) in _OPTION_CHECKS.items()}
    for key, value in opts.items():
        if key not in _OPTION_CHECKS:
            raise TypeError(f"Unknown kernel option {key!r}; expected one of {sorted(_OPTION_CHECKS)}")
        _, ok, what = _OPTION_CHECKS[key]
        values = list(value.by_arch.values()) + ([] if value.default is _UNSPECIFIED else [value.default]) \
            if isinstance(value, ByTarget) else [value]
        for v in values:
            if not ok(v):
                raise ValueError(f"Kernel option {key}={v!r} is invalid: it must be {what}")
        out[key] = value
    return out


@dataclass(frozen=True)
class VariantKey:
    """Everything a compiled variant depends on besides the kernel itself."""

    specs: tuple[ArgSpec, ...]
    facts: tuple[ArrayFacts | None, ...]  # per array or list argument (lists: None)
    backend: str  # the registered backend's name
    arch: str | None


@dataclass
class Variant:
    """One compiled specialization; `written`: the IR parameters it may write (`written_params`)."""

    ir: Function
    compiled: CompiledKernel
    compile_seconds: float
    written: frozenset[tuple[int, int | None]] = frozenset()


@dataclass
class Kernel:
    """A compiled-on-demand tile kernel. Launch it with `ct.launch`; it is not callable."""

    fn: Callable[..., Any]
    options: dict[str, Any]
    params: list[ParamInfo] = field(init=False)
    plan: tuple[bool, ...] | None = field(init=False)
    variants: dict[VariantKey, Variant] = field(default_factory=dict, init=False)
    fast: dict[Any, tuple[CompiledKernel, BackendSpec, bool, Quick | None, int | None]] = field(default_factory=dict,
                                                                                                  init=False)
    quick: Quick | None = field(default=None, init=False)  # the quick launcher of the variant launched last
    keyer: Keyer | None = field(default=None, init=False)  # fast_key for the argument types seen last
    keyers: dict[tuple[type, ...], Keyer | None] = field(default_factory=dict, init=False)  # by argument types

    def __post_init__(self) -> None:
        self.params = param_infos(self.fn)
        self.plan = fast_plan(self.params)
        self.__name__ = self.fn.__name__
        self.__doc__ = self.fn.__doc__

    @property
    def _pyfunc(self) -> Callable[..., Any]:
        """The decorated Python function, under cuTile's name for it."""
        return self.fn

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"Tile kernel {self.fn.__name__} cannot be called directly; use tilecraft.launch()")

    def describe(self, args: Any) -> tuple[tuple[ArgSpec, ...], list[ArrayArg | ListArg], list[Any]]:
        """Classify launch arguments; mismatches become TileArgumentError at the kernel's source."""
        try:
            return describe_args(self.params, args)
        except ArgumentError as exc:
            raise self.located(exc) from None

    def runtime_args(self, variant: Variant, flat: list[Any], to_array: Callable[[Any], Any]) -> list[Any]:
        """`flat` (from `describe`) as `variant`'s backend takes it, after the checks that need
        the compiled kernel: no read-only array where it writes, every array convertible.
        Failures are TileArgumentError naming the argument, raised before anything runs."""
        try:
            check_writable(flat, variant.written)
            return backend_args(flat, to_array)
        except ArgumentError as exc:
            raise self.located(exc) from None

    def located(self, exc: ArgumentError) -> TileArgumentError:
        """`exc` as a TileArgumentError pointing at its parameter in the kernel's source."""
        return TileArgumentError(exc.message, param_location(self.fn, exc.param))

    def replace_hints(self, **opts: Any) -> "Kernel":
        """A new kernel (with its own cache) whose options are replaced by `opts`."""
        merged = {k: v for k, v in self.options.items() if v != _OPTION_CHECKS[k][0]}
        merged.update(opts)
        return Kernel(self.fn, _check_options(merged))

    def resolved_options(self, arch: str | None) -> dict[str, Any]:
        return {k: v.resolve(arch, _OPTION_CHECKS[k][0]) if isinstance(v, ByTarget) else v
                for k, v in self.options.items()}

    def lower(self, specs: tuple[ArgSpec, ...], arch: str | None = None) -> Function:
        """Front end + passes for one specialization (no backend)."""
        fn = optimize(compile_kernel(self.fn, specs, self.resolved_options(arch)))
        if knobs.DUMP_IR.get() == "1":
            print(format_function(fn), file=sys.stderr)
        return fn

    def cached_lower(self, key: VariantKey, version: str) -> Function:
        """`lower`, through the on-disk cache shared by processes (`version`: BackendSpec.version)."""
        entry = entry_key(self.fn, (key, sorted(self.resolved_options(key.arch).items())), (version,))
        cache = default_cache()
        ir = cache.get(entry)
        if ir is None:
            ir = self.lower(key.specs, key.arch)
            cache.put(entry, ir)
        return ir

    def fast_key(self, args: Any) -> tuple[tuple[Any, ...], list[Any]] | None:
        """`fastpath.fast_key` of `args`, through generated code for the argument types seen last."""
        try:
            if self.keyer is not None:
                found = self.keyer(args)
                if found is not None:
                    return found
            found = fast_key(self.plan, args)
        except RuntimeError:   # a tensor without storage (sparse): the full path names it and says why
            return None
        if found is not None:
            types = tuple(map(type, args))
            if types not in self.keyers:
                if len(self.keyers) >= _FAST_LIMIT:
                    self.keyers.clear()
                self.keyers[types] = typed_keyer(self.plan, args)
            self.keyer = self.keyers[types]
        return found

    def remember_fast(self, key: Any, hit: tuple[CompiledKernel, BackendSpec, bool, Quick | None, int | None]) -> None:
        """Map a fast-path key to its compiled kernel, its backend, whether the backend takes
        the arguments unconverted, its quick launcher (`fastpath.quick_launcher`), which
        becomes the kernel's, and the CUDA device it was made on (None off CUDA: devices.py)
        (bounded: cleared when it grows large)."""
        if len(self.fast) >= _FAST_LIMIT:
            self.fast.clear()
        self.fast[key] = hit
        self.quick = hit[3]

    def variant(self, key: VariantKey, spec: BackendSpec) -> Variant:
        """The compiled variant for `key` (`spec`: the backend key.backend names)."""
        v = self.variants.get(key)
        if v is None:
            start = time.perf_counter()
            ir = self.cached_lower(key, spec.version)
            compiled = spec.backend.compile(ir, _param_facts(ir, key))
            seconds = time.perf_counter() - start
            check_compile_time(self.fn.__name__, seconds)
            v = Variant(ir, compiled, seconds, written_params(ir))
            self.variants[key] = v
        return v

    def ir(self, *args: Any) -> str:
        """The Tile IR text this kernel compiles to for these launch arguments."""
        specs, _, _ = self.describe(args)
        return format_function(self.lower(specs))


def _param_facts(ir: Function, key: VariantKey) -> list[ArrayFacts | None]:
    """Facts per IR parameter (arrays get theirs in order; lists and scalars None)."""
    facts = iter(key.facts)
    return [next(facts) if isinstance(p.type, (ArrayType, ListType)) else None for p in ir.params]


def kernel(fn: Callable[..., Any] | None = None, /, **opts: Any) -> Any:
    """Decorate a tile kernel: `@ct.kernel` or `@ct.kernel(num_ctas=2, occupancy=2)`."""
    checked = _check_options(opts)

    def wrap(f: Callable[..., Any]) -> Kernel:
        if not callable(f) or not hasattr(f, "__code__"):
            raise TypeError(f"@kernel decorates a Python function, got {type(f).__name__}")
        return Kernel(f, checked)
    return wrap(fn) if fn is not None else wrap
