"""Every TILECRAFT_* environment variable, declared once; nothing else reads os.environ."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Knob:
    name: str
    default: str
    doc: str
    _key: Any = field(init=False, repr=False, compare=False)  # the name as os.environ stores it

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", os.environ.encodekey(self.name))

    def get(self) -> str:
        return os.environ.get(self.name, self.default)

    def raw(self) -> Any:
        """The variable as os.environ holds it (bytes on POSIX), None when unset: one dict lookup,
        for a per-launch cache key that must notice a change (`get`'s encode and decode cost
        ~25 times more). Reads CPython's os.environ internals (`_data`, `encodekey`)."""
        return os.environ._data.get(self._key)  # type: ignore[attr-defined]

    def raw_lookup(self) -> tuple[dict[Any, Any], Any]:
        """(mapping, key): `raw()` is `mapping.get(key)`, for generated code that inlines it."""
        return os.environ._data, self._key  # type: ignore[attr-defined]


BACKEND = Knob("TILECRAFT_BACKEND", "",
               "Force a backend for every launch by name: interpreter, triton, triton-interpret or one registered "
               "in tilecraft/backends.")
CACHE_DIR = Knob("TILECRAFT_CACHE_DIR", str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tilecraft"),
                 "Directory of the on-disk compile cache; empty or 'off' disables it.")
DUMP_IR = Knob("TILECRAFT_DUMP_IR", "", "Set to 1 to print each kernel's Tile IR to stderr when it is compiled.")
SPLIT_K = Knob("TILECRAFT_SPLIT_K", "",
                "Set to 0 to keep matmul-like kernels from splitting their K loop across more blocks on a GPU whose "
                "SMs a launch's grid leaves mostly idle, where the loop is long (read when a kernel is compiled; "
                "see backends/splitting.py).")
TF32_STAGING = Knob("TILECRAFT_TF32_STAGING", "",
                     "Set to 0 to keep float32 (tf32) matmuls from rounding large operands in a prologue on sm_90+ "
                     "GPUs (read when a kernel is compiled; see backends/triton/operand_staging.py).")

ALIGN_STAGING = Knob("TILECRAFT_ALIGN_STAGING", "",
                      "Set to 0 to keep matmuls from copying large operands whose rows are not 16-byte aligned into "
                      "aligned scratch in a prologue on sm_90+ GPUs (read when a kernel is compiled; see "
                      "backends/triton/operand_staging.py).")

TILE_SPLIT = Knob("TILECRAFT_TILE_SPLIT", "",
                  "Set to 0 to keep a matmul-like kernel whose grid leaves SMs idle (too few blocks, or a last wave "
                  "mostly empty) from running each output tile as several smaller blocks on the GPU (read when a "
                  "kernel is compiled; see backends/tile_splitting.py).")

BLOCK_MERGE = Knob("TILECRAFT_BLOCK_MERGE", "",
                   "Set to 0 to keep a matmul-like kernel of small tiles (32x32) launched on several blocks per SM "
                   "from running several of its blocks as one block of a taller tile on the GPU (read when a kernel "
                   "is compiled; see passes/block_merge.py).")

RESIDENT_ROWS = Knob("TILECRAFT_RESIDENT_ROWS", "",
                     "Set to 0 to keep a kernel that walks an array's row tile by tile in several passes (cuTile's "
                     "LayerNorm) from running, on the GPU, unrolled with each tile loaded once for the row length "
                     "launched (read when a kernel is compiled; see passes/resident_rows.py).")

STREAM_K = Knob("TILECRAFT_STREAM_K", "",
                 "Set to 1 to run a matmul-like kernel whose grid's last wave would leave many SMs idle as one "
                 "program per SM over all tiles' K iterations on the GPU (read when a kernel is compiled; see "
                 "backends/stream_k.py). Off by default: on the H200 its workspace traffic still makes it slower than the "
                 "tiles as written.")

WARP_SPECIALIZE = Knob("TILECRAFT_WARP_SPECIALIZE", "",
                       "Set to 0 to keep a kernel whose one loop streams tiles through MMAs (flash attention) from "
                       "running as a warp-specialized Gluon kernel on an sm_90 GPU (read when a kernel is compiled; see "
                       "backends/gluon).")

TENSOR_READER = Knob("TILECRAFT_TENSOR_READER", "",
                      "Set to 0 to keep cached launches on a GPU from reading torch tensors through a C++ reader built "
                      "once per machine in the background (backends/triton/tensor_reader.py); set to 'debug' to print why "
                      "it could not be built. A failed build is recorded in Triton's cache (tilecraft_tensor_reader.failed) "
                      "and not tried again for a day, or until torch or the compiler changes; 'debug' prints the record's "
                      "path: delete it to build again.")

TUNE_CACHE = Knob("TILECRAFT_TUNE_CACHE", "",
                  "Set to 1 to keep tilecraft.tune.exhaustive_search's results under TILECRAFT_CACHE_DIR/tune and "
                  "return them, untimed, to the same search later (its `cache` argument overrides this; see "
                  "tilecraft/tune/cache.py).")

ALL = (BACKEND, CACHE_DIR, DUMP_IR, SPLIT_K, TILE_SPLIT, BLOCK_MERGE, RESIDENT_ROWS, STREAM_K, WARP_SPECIALIZE,
       TF32_STAGING, ALIGN_STAGING, TENSOR_READER, TUNE_CACHE)


def cache_dir() -> Path | None:
    value = CACHE_DIR.get()
    return None if value.lower() in ("", "0", "off", "none") else Path(value)
