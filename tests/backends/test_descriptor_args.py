"""ExpandedLauncher (backends/triton/descriptor_args.py) on the CPU: against Triton 3.6's own
descriptor wrapper (the C launch function a recorder, tilecraft's C launcher left out), and
through tilecraft's C launcher built against the stand-in driver (cuda_stub.py). The CUtensorMap
encoding is a stand-in that counts its calls, so what is checked is which arguments reach the
launch and when a descriptor is encoded again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import cuda_stub

torch = pytest.importorskip("torch")
driver = pytest.importorskip("triton.backends.nvidia.driver")

from tilecraft.backends.triton import descriptor_args, native_launch  # noqa: E402
from tilecraft.backends.triton.descriptor_args import CACHE_LIMIT, ExpandedLauncher  # noqa: E402

METAS = [{"block_size": [16, 32]}, {"block_size": [32, 16]}]
SIGNATURE = {"n": "i32", "a_desc": "tensordesc<fp32[16, 32]>", "b_desc": "tensordesc<fp32[32, 16]>", "m": "i32"}


@pytest.fixture
def triton_only(monkeypatch):
    """No tilecraft C launcher (as on a machine without a C compiler): Triton's C function launches."""
    monkeypatch.setattr(native_launch, "launcher_for", lambda *a, **k: None)


def _encode(encoded: list):
    """A stand-in for Triton's expansion of a descriptor: records it, returns (map, shape, strides)."""
    def encode(desc, meta):
        encoded.append((desc.base.data_ptr(), tuple(desc.strides)))
        return [("map", desc.base.data_ptr(), tuple(meta["block_size"])), *desc.shape, *desc.strides]
    return encode


def _compiled(calls: list, scratch: int = 0, signature: dict = SIGNATURE) -> SimpleNamespace:
    """A CompiledKernel whose launcher is Triton's descriptor wrapper around a recording C launch
    (SIGNATURE: an int, two descriptors, an int)."""
    run = SimpleNamespace(launch=driver.wrap_handle_tensordesc(lambda *a: calls.append(a), signature, METAS),
                          launch_cooperative_grid=False, launch_pdl=True, global_scratch_size=scratch,
                          profile_scratch_size=0)
    metadata = SimpleNamespace(tensordesc_meta=METAS, num_ctas=1, launch_cooperative_grid=False, launch_pdl=False,
                               global_scratch_size=scratch, profile_scratch_size=0, num_warps=4, shared=1024)
    return SimpleNamespace(run=run, function=0x5EED, packed_metadata="packed", metadata=metadata,
                           src=SimpleNamespace(signature=signature))


def _make(block):
    return lambda t: SimpleNamespace(base=t, shape=list(t.shape), strides=list(t.stride()), block_shape=block)


def test_passes_what_tritons_wrapper_passes_and_encodes_once_per_array(monkeypatch, triton_only):
    encoded: list = []
    monkeypatch.setattr(descriptor_args, "encode", _encode(encoded))
    monkeypatch.setattr(driver, "make_tensordesc_arg", _encode([]))
    calls: list = []
    compiled = _compiled(calls)
    launcher = ExpandedLauncher.of(compiled, [_make([16, 32]), _make([32, 16])])
    assert launcher is not None
    a, b = torch.zeros(64, 96), torch.zeros(96, 48)
    launcher.launch((3, 1, 1), 7, (5,), [a, b], (9,))
    # Triton's own path: the wrapper expands TensorDescriptor-like arguments itself
    lead = (3, 1, 1, 7, 0x5EED, False, True, None, None, "packed", None, None, None)
    compiled.run.launch(*lead, 5, _make([16, 32])(a), _make([32, 16])(b), 9)
    assert calls[0] == calls[1]
    assert calls[0][:13] == lead and calls[0][13] == 5 and calls[0][-1] == 9
    assert encoded == [(a.data_ptr(), (96, 1)), (b.data_ptr(), (48, 1))]

    launcher.launch((3, 1, 1), 7, (5,), [a, b], (9,))  # the same arrays: nothing encoded again
    assert len(encoded) == 2 and calls[2] == calls[0]
    b2 = torch.zeros(96, 48)  # another array: its descriptor is encoded, a's is kept
    launcher.launch((3, 1, 1), 7, (5,), [a, b2], (9,))
    assert encoded[2:] == [(b2.data_ptr(), (48, 1))] and ("map", b2.data_ptr(), (32, 16)) in calls[3]
    memory = torch.zeros(64 * 128)
    packed, wide = memory[:64 * 96].view(64, 96), memory.view(64, 128)[:, :96]  # one address and shape
    launcher.launch((3, 1, 1), 7, (5,), [packed, b], (9,))
    launcher.launch((3, 1, 1), 7, (5,), [wide, b], (9,))  # other strides: encoded again
    assert encoded[3:] == [(packed.data_ptr(), (96, 1)), (wide.data_ptr(), (128, 1))]
    assert 128 in calls[5] and 128 not in calls[4]  # the row stride that reached the kernel


def test_cache_is_bounded(monkeypatch, triton_only):
    encoded: list = []
    monkeypatch.setattr(descriptor_args, "encode", _encode(encoded))
    launcher = ExpandedLauncher.of(_compiled([]), [_make([16, 32]), _make([32, 16])])
    b = torch.zeros(96, 48)
    arrays = [torch.zeros(64, 96) for _ in range(CACHE_LIMIT + 5)]
    for a in arrays:
        launcher.launch((1, 1, 1), 0, (), [a, b])
    assert len(launcher._encoded) <= CACHE_LIMIT
    assert len(encoded) == len(arrays) + 2  # b again after the cache started over


def test_cache_holds_a_models_worth_of_arrays(monkeypatch, triton_only):
    """Arrays rotating through a few hundred addresses (a matmul shared by a model's layers) are
    each encoded once, however many times the rotation comes round."""
    encoded: list = []
    monkeypatch.setattr(descriptor_args, "encode", _encode(encoded))
    launcher = ExpandedLauncher.of(_compiled([]), [_make([16, 32]), _make([32, 16])])
    b = torch.zeros(96, 48)
    arrays = [torch.zeros(64, 96) for _ in range(300)]
    for _ in range(3):
        for a in arrays:
            launcher.launch((1, 1, 1), 0, (), [a, b])
    assert len(encoded) == len(arrays) + 1


def test_declines_other_launchers(triton_only):
    make = [_make([16, 32]), _make([32, 16])]
    assert ExpandedLauncher.of(_compiled([], scratch=128), make) is None  # global scratch: Triton allocates it
    plain = _compiled([])
    plain.run.launch = lambda *a: None  # no descriptor wrapper around a C function
    assert ExpandedLauncher.of(plain, make) is None
    assert ExpandedLauncher.of(_compiled([]), make[:1]) is None  # descriptors the kernel does not take
    assert ExpandedLauncher.of(SimpleNamespace(run=lambda *a: None), make) is None  # a stand-in compiled kernel


def test_descriptor_parameters_expand_as_tritons_launcher_expands_them():
    """tilecraft's C launcher takes a host descriptor as Triton's launcher passes it: the map,
    then the shape (int32) and strides (int64); only when asked, and only with every
    descriptor's metadata (without it Triton passes the base pointer instead)."""
    compiled = _compiled([])
    assert native_launch.argument_types(compiled, descriptors=True) == b"imiiqqmiiqqi"
    assert native_launch.argument_types(compiled) is None
    gluon = dict(SIGNATURE, b_desc="tensordesc<bf16[128, 64, 2],NVMMASharedLayout(swizzle_byte_width=128, "
                 "element_bitwidth=16, rank=3)>")  # a Gluon descriptor's type: its layout after the block
    compiled.src.signature = gluon
    assert native_launch.argument_types(compiled, descriptors=True) == b"imiiqqmiiiqqqi"
    compiled.src.signature = SIGNATURE
    compiled.metadata.tensordesc_meta = [METAS[0], None]
    assert native_launch.argument_types(compiled, descriptors=True) is None


@pytest.mark.skipif(cuda_stub.missing() is not None, reason="the C launcher cannot be built here")
def test_tilecraft_c_launcher_takes_the_maps(monkeypatch, tmp_path):
    """Through tilecraft's C launcher (stand-in driver): each descriptor reaches the kernel as its
    map's bytes (the stand-in records a parameter's first 8), shape and strides, between the
    head and the tail; the launcher refuses a map that is not 128 bytes, and map_bytes anything
    but Triton's tensor map."""
    module, stub = cuda_stub.build(tmp_path / "launcher")
    maps = {}

    def encode(desc, meta):
        raw = maps.setdefault(desc.base.data_ptr(), bytes([len(maps) + 1]) * 128)
        return [SimpleNamespace(raw=raw), *desc.shape, *desc.strides]
    monkeypatch.setattr(descriptor_args, "encode", encode)
    compiled = _compiled([])
    native = native_launch.launcher_for(compiled, module, descriptors=True)
    stand_in = native._replace(module=SimpleNamespace(map_bytes=lambda m: m.raw))  # Triton's maps need a GPU
    launcher = descriptor_args.ExpandedLauncher(compiled, lambda *a: pytest.fail("Triton's launch ran"), METAS,
                                                [_make([16, 32]), _make([32, 16])], stand_in)
    a, b = torch.zeros(64, 96), torch.zeros(96, 48)
    stub.set(types=b"iQiiqqQiiqqi")  # a map recorded as its first 8 bytes
    try:
        launcher.launch((3, 2, 1), 7, (5,), [a, b], (9,))
        got = stub.last()
    finally:
        stub.set()  # the stand-in is shared by the process's tests
    first = [int.from_bytes(maps[t.data_ptr()][:8], "little") for t in (a, b)]
    assert got.values == (5, first[0], 64, 96, 96, 1, first[1], 96, 48, 48, 1, 9, 0, 0)
    assert got.grid == (3, 2, 1) and got.block == (128, 1, 1) and got.shared == 1024 and got.stream == 7
    with pytest.raises(TypeError, match="128 bytes"):
        module.launch(1, 1, 1, 0, 0x5EED, 128, 0, b"m", native.head[4], False, b"short")
    with pytest.raises(TypeError, match="PyCUtensorMap"):
        module.map_bytes(b"\0" * 128)


def _stand_in_maps(monkeypatch, tmp_path) -> tuple:
    """(the stand-in driver, the maps made by address): tilecraft's C launcher built against the
    stand-in, each map (Triton's need a GPU) 16 times an 8-byte number counting the addresses."""
    module, stub = cuda_stub.build(tmp_path / "launcher")
    maps: dict[int, bytes] = {}

    def encode(desc, meta):
        raw = maps.setdefault(desc.base.data_ptr(), (len(maps) + 1).to_bytes(8, "little") * 16)
        return [SimpleNamespace(raw=raw), *desc.shape, *desc.strides]
    monkeypatch.setattr(descriptor_args, "encode", encode)
    stand_in = SimpleNamespace(launch=module.launch, quick=module.quick, map_bytes=lambda m: m.raw)
    real_launcher_for = native_launch.launcher_for
    monkeypatch.setattr(native_launch, "launcher_for",
                        lambda compiled, m=None, descriptors=False: real_launcher_for(compiled, module, descriptors)
                        ._replace(module=stand_in))
    return stub, maps


def _quick_pair(fused, args: tuple) -> list:
    """The runtime's quick launchers of `fused` for the specialization of `args` (none a
    Constant): its Python expression's, and its C one."""
    from tilecraft import knobs
    from tilecraft.backends.base import FusedLaunch
    from tilecraft.runtime.fastpath import quick_launcher
    quicks = [quick_launcher((False,) * len(args), args, knobs.BACKEND, knobs.BACKEND.raw(), launch, 2**24 - 1)
              for launch in (FusedLaunch(fused.expr, fused.env), fused)]
    assert [type(q).__name__ for q in quicks] == ["function", "Quick"]
    return quicks


@pytest.mark.skipif(cuda_stub.missing() is not None, reason="the C launcher cannot be built here")
def test_quick_launches_of_host_descriptor_kernels_keep_each_arrays_maps(monkeypatch, tmp_path):
    """The runtime's quick path for a host-descriptor kernel (`DirectLauncher.fused_launch` of an
    `expanded_launch`), in C and as its Python expression: a launch passes each descriptor as its
    array's map (the stand-in driver records a parameter's first 8 bytes), shape and strides,
    as `DirectLauncher.launch` does; a map is made once per array address and kept (more
    addresses than the C launcher keeps per descriptor are made again, never mixed up), in C
    only for a launch that goes ahead, and an argument of another layout is declined."""
    from tilecraft.backends.triton import launching
    stub, maps = _stand_in_maps(monkeypatch, tmp_path)
    compiled = _compiled([])
    made = ((1, 0, "lambda t: TensorDescriptor(t, list(t.shape), list(t.stride()), [16, 32])"),
            (2, 1, "lambda t: TensorDescriptor(t, list(t.shape), list(t.stride()), [32, 16])"))
    lowered = SimpleNamespace(host_descriptors=made, launch=("a2", "D0", "D1", "a3"))
    a, b = torch.zeros(64, 96), torch.zeros(96, 48)
    expanded = launching.expanded_launch(compiled, lowered, (a, b, 5, 9), (5, None, None, 9))
    assert expanded.fused_args == ("a2", "m0.0", "64", "96", "96", "1", "m1.1", "96", "48", "48", "1", "a3")
    dl = launching.DirectLauncher(compiled, None, True, expanded=expanded)
    asked = []  # what the C launcher asks Python for: the maps it does not keep
    map_bytes = expanded.launcher.map_bytes
    expanded.launcher.map_bytes = lambda d, t: asked.append((d, t.data_ptr())) or map_bytes(d, t)
    quicks = _quick_pair(dl.fused_launch(), (a, b, 5, 9))
    stub.set(types=b"iQiiqqQiiqqi")  # a map recorded as its first 8 bytes
    try:
        bs = [torch.zeros(96, 48) for _ in range(6)]
        for quick in quicks:
            for i in (0, 1, 2, 3, 4, 5, 0, 5, 2):  # six addresses of b: more than the C launcher keeps
                assert quick(7, (3, 2), (a, bs[i], -5, 11)) is True
                got = stub.last()
                first = [int.from_bytes(maps[t.data_ptr()][:8], "little") for t in (a, bs[i])]
                assert got.values == (-5, first[0], 64, 96, 96, 1, first[1], 96, 48, 48, 1, 11, 0, 0)
                assert got.grid == (3, 2, 1) and got.stream == 7
                dl.launch((3, 2, 1), (a, bs[i], -5, 11), 7)  # the launcher's own launch: the same
                assert stub.last() == got
            assert len(maps) == 8  # each array's map made once (a's and b's by expanded_launch)
            asked.clear()
            for _ in range(3):
                assert quick(7, (3, 2), (a, bs[2], -5, 11)) is True and stub.last() == got
            assert asked == ([] if quick is quicks[1] else [(0, a.data_ptr()), (1, bs[2].data_ptr())] * 3)
            launches = stub.launches
            assert quick(7, (3, 2), (a, torch.zeros(96, 64)[:, :48], -5, 11)) is False  # other strides
            assert quick(7, (3, 2), (a, torch.zeros(96, 48, dtype=torch.float64), -5, 11)) is False
            assert stub.launches == launches and len(maps) == 8
        stub.set(types=b"iQiiqqQiiqqi", context=False)  # not launched: the C launcher makes no map
        assert quicks[1](7, (3, 2), (a, torch.zeros(96, 48), -5, 11)) is False and len(maps) == 8
    finally:
        stub.set()  # the stand-in is shared by the process's tests


@pytest.mark.skipif(cuda_stub.missing() is not None, reason="the C launcher cannot be built here")
def test_quick_launches_of_the_gluon_variant_run_its_grid_as_its_direct_launch(monkeypatch, tmp_path):
    """The Gluon variant's quick launch (`GluonKernel.fused_launch`, C and Python), made for the
    user's grid of 6 blocks on a persistent kernel: that grid runs as 4 programs (the GPU's
    stand-in multiprocessors) taking the user's grid as their last arguments, with the int and
    both descriptors' maps, shapes and strides, exactly as `GluonKernel.direct` launches it;
    another grid, or arguments of another layout, are declined, having launched nothing."""
    gluon_kernel = pytest.importorskip("tilecraft.backends.gluon.kernel")
    stub, maps = _stand_in_maps(monkeypatch, tmp_path)
    monkeypatch.setattr(gluon_kernel, "_multiprocessors", lambda args: 4)
    descriptors = {name: SIGNATURE[name] for name in ("a_desc", "b_desc")}
    compiled = _compiled([], signature={"n": "i32", "m": "constexpr", **descriptors, "gx": "i32", "gy": "i32",
                                        "gz": "i32"})
    kernel = object.__new__(gluon_kernel.GluonKernel)
    kernel.lowered = SimpleNamespace(launch=("a2", "a3"), grid_divisor=1, persistent=True, units_paired=False,
                                     descriptors=(SimpleNamespace(param=0), SimpleNamespace(param=1)))
    kernel._flatten = lambda a, b, n, m: (n, m)
    expanded = ExpandedLauncher.of(compiled, [_make([16, 32]), _make([32, 16])])
    a, b = torch.zeros(64, 96), torch.zeros(96, 48)
    quicks = _quick_pair(kernel.fused_launch(expanded, (6, 1, 1), (a, b, 5, 3)), (a, b, 5, 3))
    direct = kernel.direct(compiled, expanded)
    stub.set(types=b"ixQiiqqQiiqqiii")  # a map recorded as its first 8 bytes
    try:
        for quick in quicks:
            for b2 in (b, torch.zeros(96, 48)):
                assert quick(7, (6,), (a, b2, -5, 3)) is True
                got = stub.last()
                first = [int.from_bytes(maps[t.data_ptr()][:8], "little") for t in (a, b2)]
                assert got.values == (-5, first[0], 64, 96, 96, 1, first[1], 96, 48, 48, 1, 6, 1, 1, 0, 0)
                assert got.grid == (4, 1, 1) and got.stream == 7
                direct((6, 1, 1), (a, b2, -5, 3), 7)
                assert stub.last() == got
            launches = stub.launches
            for grid in ((5,), (6, 2), (3,)):
                assert quick(7, grid, (a, b, -5, 3)) is False
            assert quick(7, (6,), (a, torch.zeros(96, 64)[:, :48], -5, 3)) is False  # other strides
            assert stub.launches == launches
    finally:
        stub.set()  # the stand-in is shared by the process's tests
