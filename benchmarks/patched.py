"""Run a benchmark script with some of tilecraft's module constants set otherwise: the probes
behind A/B result files that compare a policy threshold with another value.

    python benchmarks/patched.py tilecraft.backends.triton.operand_staging.STAGE_MIN_ELEMENTS=0 \\
        -- benchmarks/size_sweep.py --only matmul --cases "1024x1024x1024 float32"

Each MODULE.NAME=VALUE (VALUE a Python literal) is set before the script runs (which writes its
own results, as it says); the constant must exist (a typo is an error, not a silent no-op) and
be read when kernels compile or launch, as the policy constants are. The script runs as
`__main__` with its own folder first on sys.path.
"""

from __future__ import annotations

import ast
import importlib
import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit(__doc__)
    cut = argv.index("--")
    settings, (script, *args) = argv[:cut], argv[cut + 1:]
    for setting in settings:
        target, value = setting.split("=", 1)
        module_name, name = target.rsplit(".", 1)
        module = importlib.import_module(module_name)
        if not hasattr(module, name):
            raise SystemExit(f"{module_name} has no constant {name}")
        setattr(module, name, ast.literal_eval(value))
    sys.path.insert(0, str(Path(script).resolve().parent))
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
