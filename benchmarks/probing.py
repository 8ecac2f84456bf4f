"""What the probes share: edits of the Triton source tilecraft generated for a kernel, loading
an edited source as a Triton kernel specialized as tilecraft's launch does, launching it with
tilecraft's grid (and persistent grid loop), and checking then timing one row. A probe times
such variants side by side to find what the compiler should generate; it is not a product
benchmark.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import triton

from row_probe import _variant as load_variant  # also puts the samples and the shim on sys.path


def sub(pattern: str, repl: str | Callable, source: str, count: int | None = 1) -> str:
    """`source` with `pattern` replaced; ValueError unless it matched `count` times (any, if None)."""
    out, n = re.subn(pattern, repl, source)
    if n == 0 or (count is not None and n != count):
        raise ValueError(f"edit did not apply: {pattern!r} matched {n} times")
    return out


def no_clamps(source: str) -> str:
    """Tile starts used as they are, not clamped to the array's extent (all in bounds here)."""
    return sub(r"(\w+_start\d) = tl\.where\(\w+_inside\d, (.+?), \w+_shape\d\)", r"\1 = \2", source, None)


@dataclass(frozen=True)
class Variant:
    """Triton source derived from `base` (a tilecraft TritonKernel): same parameters and launch."""

    name: str
    config: str
    source: str | None  # None: the edit failed (see error)
    options: dict
    base: Any
    error: str | None = None
    host_descriptors: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (array parameter, block shape)


_DEVICE_DESCRIPTOR = re.compile(
    r"(\w+)_desc = tl\.make_tensor_descriptor\((\w+), shape=\[[^\]]*\], strides=\[[^\]]*\], "
    r"block_shape=\[([\d, ]+)\], padding_option='zero'\)")


def host_descriptors(source: str, kernel: str) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """`source` with the descriptors of `kernel` made on the host (Triton's `TensorDescriptor`,
    passed as new leading parameters `<array>_hd`) instead of in every program (a device-side
    descriptor is written to global scratch and fenced by each program), and the (array, block
    shape) list a launch must pass."""
    found = tuple((m[2], tuple(int(d) for d in m[3].split(", "))) for m in _DEVICE_DESCRIPTOR.finditer(source))
    if not found:
        raise ValueError("edit did not apply: no device-side descriptors")
    source = _DEVICE_DESCRIPTOR.sub(lambda m: f"{m[1]}_desc = {m[2]}_hd", source)
    params = "".join(f"{array}_hd, " for array, _ in found)
    return sub(rf"(\ndef {kernel}\()", lambda m: m[1] + params, source), found


def config_label(source: str | None, options: dict) -> str:
    """Warps, the kernel's pipeline stages and its first pipelined loop's (`tl.range(num_stages=)`)."""
    loop = re.search(r"tl\.range\([^\n]*num_stages=(\d+)", source or "")
    return f"w{options.get('num_warps')} s{options.get('num_stages')}" + (f" loop{loop[1]}" if loop else "")


def variant_adder(out: list[Variant]) -> Callable[..., None]:
    """`add(name, make, options, base)`: append the variant `make()` builds (its source, or the
    source and its host descriptors) to `out` (a row with its error when the edit does not
    apply; nothing when the same source and options are there)."""
    def add(name: str, make: Callable[[], str | tuple[str, tuple]], options: dict, base: Any) -> None:
        try:
            made = make()
        except ValueError as exc:
            out.append(Variant(name, config_label(None, options), None, options, base, str(exc)))
            return
        made, descriptors = made if isinstance(made, tuple) else (made, ())
        if not any(v.source == made and v.options == options for v in out):
            out.append(Variant(name, config_label(made, options), made, options, base, None, descriptors))
    return add


def loaded(v: Variant, tmp: Path) -> Any:
    """The variant's kernel, specialized as tilecraft's launch does (grid sizes not specialized)."""
    fn = load_variant(v.source, v.base.lowered.name, tmp)
    return triton.runtime.jit.JITFunction(fn.fn, do_not_specialize=list(v.base.lowered.grid_params))


def launcher(var: Variant, grid: tuple[int, int, int], args: tuple, tmp: Path) -> Callable[[], None]:
    """A launch of `var` on the kernel's runtime arguments `args` over `grid` blocks, with
    tilecraft's persistent grid loop where the variant's base kernel has one."""
    from tilecraft.backends.triton.launching import grid_loop_launch, sm_slots
    if var.source is None:
        raise ValueError(var.error)
    fn, flat = loaded(var, tmp), var.base._flatten(*args)
    if var.host_descriptors:
        from triton.tools.tensor_descriptor import TensorDescriptor
        names = list(var.base.lowered.signature)
        flat = (*[TensorDescriptor(t, list(t.shape), list(t.stride()), list(block)) for t, block in
                  ((flat[names.index(name)], block) for name, block in var.host_descriptors)], *flat)
    if var.base.lowered.grid_loop:
        compiled = fn.run(*flat, *grid, grid=(1, 1, 1), warmup=True, **var.options)
        looped = grid_loop_launch(grid, flat, sm_slots(compiled))
        if looped is None:
            raise RuntimeError("all blocks fit at once: tilecraft would launch one program per block")
        grid, flat = looped

    def launch() -> None:  # not the CompiledKernel `fn[grid](...)` returns: outputs are arguments
        fn[grid](*flat, **var.options)
    return launch


# ---- one row: check, then time ------------------------------------------------------------------
def error_line(exc: BaseException) -> str:
    """The innermost cause of `exc` in one line: a Gluon compile error's last line is a caret
    under the failing call, and the message that says why is its cause's."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def check_and_time(build: Callable[[], Callable[[], Any]], output: torch.Tensor, ref: torch.Tensor,
                   t_ref: float, flop: int) -> dict[str, Any]:
    """A row's measurements: `build()` makes the launch; one run on `output` poisoned with NaN is
    compared with `ref` (the result is the tensor the launch returns, else `output`: a Triton
    launch returns its CompiledKernel); below a relative error of 1e-2 the launch is timed
    (median of `triton.testing.do_bench`). Fields: rel_err, build_s, then ms, ratio (`t_ref` /
    ms) and tflops; or error, for a launch that fails (a finding, not the end of the run)."""
    row: dict[str, Any] = {}
    start = time.perf_counter()
    try:
        fn = build()
        output.fill_(float("nan"))
        got = fn()
        torch.cuda.synchronize()
        result = got if isinstance(got, torch.Tensor) else output
        row["rel_err"] = float((result.float() - ref).norm() / ref.norm())
        row["build_s"] = round(time.perf_counter() - start, 2)
        if row["rel_err"] < 1e-2:
            t = triton.testing.do_bench(fn, rep=100, return_mode="median")
            row.update(ms=t, ratio=t_ref / t, tflops=flop / t / 1e9)
    except Exception as exc:  # noqa: BLE001 - a launch that fails is a row, not the end
        row["error"] = error_line(exc)
    return row


def summary(row: dict[str, Any], yardstick: str) -> str:
    """A row's result in a few words: its ratio to `yardstick` and TFLOP/s, or why it has none."""
    if "ms" in row:
        return f"{row['ratio']:.3f}x {yardstick} {row['tflops']:.0f} TFLOP/s"
    return row.get("error", f"rel_err {row.get('rel_err')}")


# ---- compile-only rows (no GPU) -----------------------------------------------------------------
def sm90_resources(source: Any, options: dict[str, Any]) -> dict[str, Any]:
    """`source` (a Triton or Gluon AST source) compiled for sm_90 here: shared memory (and
    whether an sm_90 block may have that much), warps (more than asked where warp-specialized),
    registers, spills, the registers warp-specialized partitions set (setmaxnreg), and the
    barriers of warps (`bar.sync`/`barrier.sync` in the PTX, each a rendezvous)."""
    from triton.backends.compiler import GPUTarget
    from tilecraft.backends.triton.fitting import shared_memory_limit
    from tilecraft.tools.inspection import _resources
    binary = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    regs, spills = _resources(binary.asm["cubin"])
    return dict(shared=binary.metadata.shared, fits=binary.metadata.shared <= shared_memory_limit(90),
                warps=binary.metadata.num_warps, registers=regs, spills=spills,
                setmaxnreg=sorted(set(re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", binary.asm["ptx"]))),
                barriers=len(re.findall(r"\bbar(?:rier)?\.sync\b", binary.asm["ptx"])))


def record_compile(out: Any, rows: list[dict], row: dict[str, Any], build: Callable[[], dict]) -> None:
    """Append `row` with what `build()` reports (or its error: a variant that does not build is a
    finding) and the seconds it took to `rows`, print it, and rewrite `out`'s JSON."""
    start = time.perf_counter()
    try:
        row.update(build())
    except Exception as exc:  # noqa: BLE001 - see the docstring
        row["error"] = error_line(exc)
    row["compile_s"] = round(time.perf_counter() - start, 2)
    rows.append(row)
    print(row, flush=True)
    out.write_json({"mode": "compile-only sm_90", "rows": rows, "triton": triton.__version__})


def host_rounds(launch: Callable[[], None], rounds: int = 20, per_round: int = 10) -> list[float]:
    """Host time per launch (us) of `launch` in each of `rounds` rounds of `per_round` launches,
    each round after a synchronize, so the launch queue never fills and blocks the host."""
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(per_round):
            launch()
        times.append((time.perf_counter() - start) / per_round * 1e6)
    torch.cuda.synchronize()
    return times


def print_host_profile(launch: Callable[[], None], launches: int, sort: str) -> None:
    """Print where `launches` calls of `launch` spend their host time (cProfile, sorted by `sort`:
    "tottime" or "cumtime"), the top 16."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(launches):
        launch()
    profile.disable()
    torch.cuda.synchronize()
    pstats.Stats(profile).sort_stats(sort).print_stats(16)
