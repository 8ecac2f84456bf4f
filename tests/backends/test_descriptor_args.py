"""ExpandedLauncher (backends/triton/descriptor_args.py) against Triton 3.6's own descriptor
wrapper, on the CPU: the C launch function is a recorder and the CUtensorMap encoding a stand-in
that counts its calls, so what is checked is which arguments reach the C function and when a
descriptor is encoded again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
driver = pytest.importorskip("triton.backends.nvidia.driver")

from tilecraft.backends.triton import descriptor_args  # noqa: E402
from tilecraft.backends.triton.descriptor_args import CACHE_LIMIT, ExpandedLauncher  # noqa: E402

METAS = [{"block_size": [16, 32]}, {"block_size": [32, 16]}]


def _encode(encoded: list):
    """A stand-in for Triton's expansion of a descriptor: records it, returns (map, shape, strides)."""
    def encode(desc, meta):
        encoded.append((desc.base.data_ptr(), tuple(desc.strides)))
        return [("map", desc.base.data_ptr(), tuple(meta["block_size"])), *desc.shape, *desc.strides]
    return encode


def _compiled(calls: list, scratch: int = 0) -> SimpleNamespace:
    """A CompiledKernel whose launcher is Triton's descriptor wrapper around a recording C launch
    (signature: an int, two descriptors, an int)."""
    signature = {"n": "i32", "a_desc": "tensordesc<fp32[16, 32]>", "b_desc": "tensordesc<fp32[32, 16]>", "m": "i32"}
    run = SimpleNamespace(launch=driver.wrap_handle_tensordesc(lambda *a: calls.append(a), signature, METAS),
                          launch_cooperative_grid=False, launch_pdl=True, global_scratch_size=scratch,
                          profile_scratch_size=0)
    return SimpleNamespace(run=run, function="fn", packed_metadata="packed",
                           metadata=SimpleNamespace(tensordesc_meta=METAS))


def _make(block):
    return lambda t: SimpleNamespace(base=t, shape=list(t.shape), strides=list(t.stride()), block_shape=block)


def test_passes_what_tritons_wrapper_passes_and_encodes_once_per_array(monkeypatch):
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
    lead = (3, 1, 1, 7, "fn", False, True, None, None, "packed", None, None, None)
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


def test_cache_is_bounded(monkeypatch):
    encoded: list = []
    monkeypatch.setattr(descriptor_args, "encode", _encode(encoded))
    launcher = ExpandedLauncher.of(_compiled([]), [_make([16, 32]), _make([32, 16])])
    b = torch.zeros(96, 48)
    arrays = [torch.zeros(64, 96) for _ in range(CACHE_LIMIT + 5)]
    for a in arrays:
        launcher.launch((1, 1, 1), 0, (), [a, b])
    assert len(launcher._encoded) <= CACHE_LIMIT
    assert len(encoded) == len(arrays) + 2  # b again after the cache started over


def test_declines_other_launchers():
    make = [_make([16, 32]), _make([32, 16])]
    assert ExpandedLauncher.of(_compiled([], scratch=128), make) is None  # global scratch: Triton allocates it
    plain = _compiled([])
    plain.run.launch = lambda *a: None  # no descriptor wrapper around a C function
    assert ExpandedLauncher.of(plain, make) is None
    assert ExpandedLauncher.of(_compiled([]), make[:1]) is None  # descriptors the kernel does not take
    assert ExpandedLauncher.of(SimpleNamespace(run=lambda *a: None), make) is None  # a stand-in compiled kernel
