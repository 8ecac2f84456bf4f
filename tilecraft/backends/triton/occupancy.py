"""Blocks per SM for kernels that read the same stretch of an array in several passes.

cuTile's LayerNorm sample walks its row three times (mean, variance, normalize), one block per
row. The second and third reads hit L2 only while the rows of every block running at once fit
in it: at 8192 fp32 columns (32 KB a row) the H200 runs 16 such blocks per SM, 69 MB of rows in
60 MB of L2, and the sample ran 0.85x torch; the same body looping over rows on 4 programs per
SM ran 1.13x (benchmarks/results/row-l2-probe-h200-2026-12-02.json). Where the rows in flight
would overflow L2, a launch of such a kernel asks for more dynamic shared memory than it uses,
which leaves fewer blocks per SM: as many as keep the rows within `L2_SHARE` of L2, where that
is `MIN_BLOCKS` or more (with fewer, too few loads are in flight: 16384 columns ran 0.70x on 2
per SM against the sample's 0.82x). 8192 columns then ran 1.14x (6 per SM, -d). The kernel's
code does not change, so neither do its results.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...passes.resident_rows import Reread

L2_SHARE = 0.45
"""The share of L2 the rows of the blocks running at once may take. H200 (60 MB of L2), the
sample bounded to 4, 6 and 8 blocks per SM (row-l2-probe-h200-2026-12-02-c.json): 8192 columns
0.97, 1.14, 1.01x torch (16 per SM unbounded: 0.85x); 4096 columns 0.82, 1.00, 1.07x (unbounded
1.09x, 11 per SM)."""

MIN_BLOCKS = 4
"""The fewest blocks per SM a bound leaves."""

RESERVED_SHARED = 1024
"""Shared memory the GPU reserves per block (sm_80 and later)."""

SHARED_UNIT = 128
"""The granularity of a block's shared memory: 45,670 bytes per block, asked for 5 blocks on an
SM of 233,472, left room for 4 (the probe's 5 per SM ran as its 4)."""

DEFAULT_MAX_SHARED = 48 * 1024
"""The most dynamic shared memory a launch may ask for without the kernel opting in."""


def blocks_bound(footprint: int, sms: int, l2_bytes: int, blocks_per_sm: int) -> int | None:
    """Blocks per SM that keep the rows in flight (`footprint` bytes a block) within `L2_SHARE`
    of L2, where the kernel's `blocks_per_sm` (what it runs unbounded) would overflow L2 and the
    bound leaves `MIN_BLOCKS` or more; else None. H200, rows that fit unbounded ran slower
    bounded (4096 fp32 columns, 16 per SM unbounded, 35 MB: 1.03x torch on 13 per SM against
    1.05-1.11x; 5000 columns 1.05x against 1.16x: row-l2-probe-h200-2026-12-02-d.json,
    size-sweep-h200-2026-12-02-f.json)."""
    if blocks_per_sm * sms * footprint <= l2_bytes:
        return None
    bound = int(l2_bytes * L2_SHARE) // max(sms * footprint, 1)
    return bound if MIN_BLOCKS <= bound < blocks_per_sm else None


def shared_for(blocks: int, shared_per_sm: int, used: int) -> int | None:
    """The dynamic shared memory a launch asks for so that at most `blocks` blocks fit on an SM
    of `shared_per_sm` bytes (`used`: what the kernel itself takes), within what launches get
    without the kernel opting in; None where that bound cannot be asked for so."""
    want = min(shared_per_sm // blocks - RESERVED_SHARED, DEFAULT_MAX_SHARED) // SHARED_UNIT * SHARED_UNIT
    fits = shared_per_sm // (want + RESERVED_SHARED)
    return want if want > used and MIN_BLOCKS <= fits <= blocks else None


def shared_request(found: Reread | None, args: Sequence[Any], compiled: Any) -> int | None:
    """The dynamic shared memory a specialized launch of `compiled` (a loaded Triton kernel) with
    `args` asks for, for a kernel whose blocks pass over `found` again and again; None: what
    the kernel uses."""
    if found is None:
        return None
    x = args[found.param]
    if not getattr(x, "is_cuda", False) or x.dim() <= found.axis:
        return None
    import torch

    from .launching import sm_slots
    props = torch.cuda.get_device_properties(x.device)
    sms = props.multi_processor_count
    footprint = x.shape[found.axis] * found.across * x.element_size()
    blocks = blocks_bound(footprint, sms, props.L2_cache_size, sm_slots(compiled) // sms)
    return None if blocks is None else shared_for(blocks, props.shared_memory_per_multiprocessor,
                                                  compiled.metadata.shared)
