"""The GPU fast path's argument lambda (`launching.baked_flatten`), checked on the CPU: for one
specialization it must give Triton exactly what the general lambda gives, with arrays as their
addresses (the GPU launch itself is covered by the GPU suite)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.backends.triton import launching  # noqa: E402
from tilecraft.backends.triton.launching import baked_flatten, programs_per_sm  # noqa: E402

ConstInt = ct.Constant[int]


@ct.kernel
def scale_rows(X, Y, s, T: ConstInt):
    t = ct.load(X, index=(ct.bid(0), 0), shape=(1, T))
    ct.store(Y, index=(ct.bid(0), 0), tile=t * s)


@ct.kernel
def sum_list(xs, out, T: ConstInt):
    acc = ct.load(xs[0], index=(0,), shape=(T,))
    for i in range(1, len(xs)):
        acc = acc + ct.load(xs[i], index=(0,), shape=(T,))
    ct.store(out, index=(0,), tile=acc)


def _triton_kernel(kernel, args):
    """The triton-interpret backend's compiled kernel for `args` (and the arguments it takes)."""
    ct.launch(None, (1,), kernel, args, backend="triton-interpret")
    compiled = next(iter(kernel.variants.values())).compiled
    return compiled, [a for a, p in zip(args, kernel.params) if not p.constant]


def test_baked_arguments_equal_the_general_ones_with_addresses():
    x = torch.randn(6, 40)[:, 3:35]  # strided, offset view: its address is not the storage's
    y = torch.full((6, 32), float("nan"))
    compiled, args = _triton_kernel(scale_rows, (x, y, 2.5, 32))
    general = compiled._flatten(*args)
    fn = baked_flatten(compiled.lowered, args, general)
    expected = tuple(v.data_ptr() if isinstance(v, torch.Tensor) else v for v in general)
    assert fn(*args) == expected and x.data_ptr() in expected and 2.5 in expected
    # shapes and strides are constants: only the addresses are read at a launch
    assert {"shape", "stride"} <= set(compiled._flatten.__code__.co_names)
    assert set(fn.__code__.co_names) == {"data_ptr"}
    # a new address with the same key: the lambda reads it at each call
    x2, y2 = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    again = fn(x2, y2, 1.0)
    assert x2.data_ptr() in again and y2.data_ptr() in again and 1.0 in again


def test_list_arguments_keep_the_general_lambda():
    xs = [torch.randn(16) for _ in range(3)]
    out = torch.empty(16)
    compiled, args = _triton_kernel(sum_list, (xs, out, 16))
    torch.testing.assert_close(out, xs[0] + xs[1] + xs[2])
    general = compiled._flatten(*args)
    baked = baked_flatten(compiled.lowered, args, general)
    assert baked.__code__.co_code == compiled._flatten.__code__.co_code


def test_the_native_launcher_compiles(tmp_path):
    """tilecraft's C launcher is valid C against Triton's CUDA header, without warnings (it is
    built and run against a stand-in driver in test_native_quick.py)."""
    import shutil
    import subprocess
    import sysconfig

    from triton.backends.nvidia import driver

    from tilecraft.backends.triton import native_launch
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    source = tmp_path / "launch.c"
    source.write_text(native_launch.source("tilecraft_launch"))
    done = subprocess.run([cc, "-fsyntax-only", "-Wall", "-Werror", f"-I{driver.include_dirs[0]}",
                           f"-I{sysconfig.get_paths()['include']}", str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class _Meta:
    num_ctas, launch_cooperative_grid, launch_pdl = 1, False, False
    global_scratch_size = profile_scratch_size = 0
    tensordesc_meta = None


class _Src:
    signature = {"x": "*fp32", "n": "i32", "one": "constexpr", "s": "fp32", "big": "i64"}


class _Compiled:
    metadata, src = _Meta(), _Src()


def test_native_argument_types_and_what_it_leaves_to_triton():
    from tilecraft.backends.triton.native_launch import argument_types
    compiled = _Compiled()
    assert argument_types(compiled) == b"pixfq"
    compiled.src = type("S", (), {"signature": {"h": "fp16"}})()  # a half-precision scalar: Triton's
    assert argument_types(compiled) is None
    compiled.src, compiled.metadata = _Src(), type("M", (_Meta,), {"global_scratch_size": 128})()
    assert argument_types(compiled) is None


@ct.kernel
def double_tiles(X, Y, T: ConstInt):
    t = ct.load(X, index=(ct.bid(0), ct.bid(1)), shape=(T, T))
    ct.store(Y, index=(ct.bid(0), ct.bid(1)), tile=t * 2)


def test_descriptor_kernels_run_their_host_descriptor_variant(dev):
    """Launches of a kernel reading through tensor descriptors run its host-descriptor variant,
    the first and the cached (fast path: on the GPU, the C quick path) launch alike, with partial
    edge tiles; wherever the kernel has no descriptors (the CPU backends, GPUs before sm_90)
    nothing changes."""
    x = np.random.default_rng(7).standard_normal((40, 24)).astype(np.float32)  # 40 rows: not a multiple of 16
    for _ in range(3):
        y = dev.poison((40, 24), np.float32)
        dev.launch((5, 3), double_tiles, (dev.put(x), y, 8))
        np.testing.assert_array_equal(dev.get(y), x * 2)
    compiled = [v.compiled for key, v in double_tiles.variants.items()
                if getattr(key.backend, "value", key.backend) == dev.name]
    checked = 0
    for kernel in compiled:
        if getattr(kernel, "lowered", None) is not None and kernel.lowered.uses_descriptors:
            host = kernel._host  # made by the first launch that ran it
            assert host is not None and "make_tensor_descriptor" not in host.source
            checked += 1
    if dev.name == "triton" and torch.cuda.get_device_capability()[0] >= 9:
        assert checked, "the kernel should read through descriptors on sm_90+ (40 rows: not a multiple of 16)"
        # launches without the `backend` option take the quick path: in C, maps kept per address
        stream, xt = torch.cuda.current_stream(), dev.put(x)
        for _ in range(2):
            y = dev.poison((40, 24), np.float32)
            ct.launch(stream, (5, 3), double_tiles, (xt, y, 8))
        assert type(double_tiles.quick).__name__ == "Quick"
        for _ in range(2):
            y = dev.poison((40, 24), np.float32)
            assert double_tiles.quick(stream, (5, 3), (xt, y, 8)) is True
            np.testing.assert_array_equal(dev.get(y), x * 2)


@ct.kernel
def offset_gather(X, Y, n, T: ConstInt):
    i = ct.bid(0) * T + ct.arange(T, dtype=ct.int32)
    ct.scatter(Y, i, ct.gather(X, i + n))


def test_int_arguments_change_divisibility_between_cached_launches(dev):
    """Repeat launches with arrays of one layout and an int argument that is a multiple of 16,
    then not, then again: each reads at its own offset. Triton compiles a kernel per class (a
    multiple of 16 lets a gather at offset n vectorize), and the fast path once reused the first
    launch's for all (on the GPU n = 33 then ran 8-byte loads misaligned); the CPU backends pass
    either way, the GPU run is the check."""
    x = np.arange(256, dtype=np.float32)
    for n in (32, 33, 48, 1, 0, 7):
        y = dev.poison((128,), np.float32)
        dev.launch((2, 1, 1), offset_gather, (dev.put(x), y, n, 64))
        np.testing.assert_array_equal(dev.get(y), x[n:n + 128], err_msg=f"n = {n}")


def test_fused_launch_calls_the_native_launcher_as_launch_does():
    """`DirectLauncher.fused_launch`, run by the runtime's quick path, gives the native launcher
    what `DirectLauncher.launch` gives it; it is None for a grid-loop kernel or without the
    native launcher; a grid-loop kernel's is made for one grid only (the grid asked for, or
    that of the launch before it), its loop's or the one-program-per-block variant's."""
    from tilecraft import knobs
    from tilecraft.backends.base import FusedLaunch
    from tilecraft.backends.triton import launching, native_launch
    from tilecraft.runtime.fastpath import quick_launcher
    x, y = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    compiled, args = _triton_kernel(scale_rows, (x, y, 2.5, 32))
    flat = compiled._flatten(*args)
    calls = []
    dl = object.__new__(launching.DirectLauncher)
    dl._flatten = baked_flatten(compiled.lowered, args, flat)
    dl._fused_args = launching.baked_exprs(compiled.lowered, args, flat, address="p{}")
    dl._slots = dl._grid = dl._small_grid = dl._small = dl._host_variant = dl._host = dl._expanded = None
    dl._descriptors, dl._native, dl._native_head = False, lambda *xs: calls.append(xs) or True, ("f", 128, 0, b"t")
    dl._launcher = native_launch.Native(dl._native, dl._native_head, None)
    fused = dl.fused_launch()  # its expression (`native`, the C quick launcher, needs the built module)
    quick = quick_launcher(scale_rows.plan, (x, y, 2.5, 32), knobs.BACKEND, knobs.BACKEND.raw(),
                           FusedLaunch(fused.expr, fused.env), 2**24 - 1)
    x2, y2 = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    assert quick(0, (6,), (x2, y2, 1.5, 32))
    dl.launch((6, 1, 1), (x2, y2, 1.5), 0)
    assert calls[0] == calls[1] and x2.data_ptr() in calls[0] and 1.5 in calls[0]
    dl._slots = 4  # a grid-loop kernel: a fused launch for one grid only
    assert dl.fused_launch() is None
    looped = dl.fused_launch(grid=((6, 1, 1), (6, 1, 1)))
    quick = quick_launcher(scale_rows.plan, (x, y, 2.5, 32), knobs.BACKEND, knobs.BACKEND.raw(),
                           FusedLaunch(looped.expr, looped.env), 2**24 - 1)
    assert looped.grid == (6, 1, 1) and quick(0, (6,), (x2, y2, 1.5, 32)) and not quick(0, (7,), (x2, y2, 1.5, 32))
    dl.launch((6, 1, 1), (x2, y2, 1.5), 0)  # the loop: 4 programs, the grid's sizes last
    assert calls[2] == calls[3] and calls[2][:3] == (4, 1, 1) and calls[2][-3:] == (6, 1, 1)
    dl._grid = (6, 1, 1)  # made after a launch on that grid: its fused launch is that grid's
    assert dl.fused_launch().expr == looped.expr
    small = SimpleNamespace(fused_launch=lambda grid: ("small's", grid))
    dl._small_grid = lambda: small
    assert dl.fused_launch(grid=((3, 1, 1), (3, 1, 1))) == ("small's", ((3, 1, 1), (3, 1, 1)))  # 3 <= 4 programs
    dl._slots, dl._launcher = None, None
    assert dl.fused_launch() is None


def test_programs_per_sm_and_the_gpu_slots(monkeypatch):
    """Programs an SM runs at once, by whichever of shared memory, registers and threads runs out
    first, at least one; `sm_slots` reads the limits from the device (a stand-in here) and the
    resources from the loaded kernel."""
    assert programs_per_sm(147456, 186, 8, 232448) == 1  # shared memory
    assert programs_per_sm(49152, 128, 4, 232448) == 4  # registers: 65536 / (128 * 128)
    assert programs_per_sm(1024, 16, 16, 232448) == 4  # threads: 2048 / 512
    assert programs_per_sm(300000, 255, 8, 232448) == 1  # never below one
    assert programs_per_sm(0, 32, 1, 101376, 32768) == 32  # 2048 threads of 32; no shared memory
    props = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132}
    utils = SimpleNamespace(get_device_properties=lambda device: props)
    monkeypatch.setattr(launching, "driver", SimpleNamespace(active=SimpleNamespace(utils=utils)))
    monkeypatch.setattr(launching.torch.cuda, "current_device", lambda: 0)
    loaded = SimpleNamespace(metadata=SimpleNamespace(shared=98304, num_warps=4), n_regs=96,
                             _init_handles=lambda: None)
    assert launching.sm_slots(loaded) == 132 * 2  # shared memory: 232448 // 98304
