"""Load the tile kernels of a Python file without running what the file does at its top level.

`tilecraft inspect FILE.py:KERNEL` needs the kernel, not the launches, prints or benchmarks a
script runs when it is executed. So the file is parsed, and only the top-level statements that
define things run (`RULES` lists them), in a fresh module whose `__name__` is not "__main__".
"""

from __future__ import annotations

import ast
import re
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TileError
from ..runtime.kernel import Kernel
from . import CommandError

RULES = """\
- imports, and function and class definitions with their decorators (`@ct.kernel`);
- assignments that call nothing (`TILE = 128`, `ConstInt = ct.Constant[int]`) or only
  `kernel` (`add = ct.kernel(add_impl)`);
- `try` statements, and `if` statements whose condition calls nothing, made only of these (so
  an `if __name__ == "__main__":` block that calls something is skipped).
Everything else is skipped: calls such as `ct.launch(...)` or `main()`, loops, `with`, and
assignments from other calls (`a = np.ones(n)`)."""

_KERNEL_FACTORIES = {"kernel"}  # calls an assignment may make: `ct.kernel(fn)`, `ct.kernel(**opts)(fn)`


@dataclass
class LoadedFile:
    """The namespace a file's defining statements built, and what was skipped."""

    path: Path
    namespace: dict[str, Any]
    skipped: dict[str, int] = field(default_factory=dict)  # name -> line of a skipped statement setting it

    def kernel(self, name: str) -> Kernel:
        """The tile kernel `name` of this file (CommandError if there is none)."""
        found = self.namespace.get(name)
        if isinstance(found, Kernel):
            return found
        if name in self.skipped:
            raise CommandError(f"{self.path}:{self.skipped[name]}: `{name}` is set by a top-level statement that "
                               f"is not run when kernels are loaded; only these are:\n{RULES}")
        kernels = sorted(k for k, v in self.namespace.items() if isinstance(v, Kernel))
        known = f" (its kernels: {', '.join(kernels)})" if kernels else " (it defines none)"
        raise CommandError(f"{self.path} has no tile kernel named {name!r}{known}")

    def command_error(self, exc: TileError) -> CommandError:
        """A compile error of one of this file's kernels as a command reports it: located, with
        `note_for`'s note where a skipped statement explains it."""
        note = self.note_for(exc.message)
        return CommandError(f"{type(exc).__name__}: {exc}" + (f"\n{note}" if note else ""))

    def note_for(self, message: str) -> str:
        """A note for a compile error about a name that a skipped statement would have set."""
        for name in re.findall(r"[Nn]ame `(\w+)` is not defined", message):
            if name in self.skipped:
                return (f"note: `{name}` is set on line {self.skipped[name]} of {self.path} by a top-level "
                        f"statement that is not run when kernels are loaded; only these are:\n{RULES}")
        return ""


def load_kernel(spec: str) -> tuple[LoadedFile, Kernel]:
    """`FILE.py:KERNEL` of a command line: the file's defining statements run (`load_file`), and
    its tile kernel of that name."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise CommandError(f"expected FILE.py:KERNEL, got {spec!r}", status=2)
    loaded = load_file(path)
    return loaded, loaded.kernel(name)


def load_file(path: str | Path) -> LoadedFile:
    """Run the defining top-level statements of the Python file `path` (see the module doc) in
    a new module; its folder goes on sys.path, as when the file is run as a script."""
    path = Path(path)
    try:
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except SyntaxError as exc:
        raise CommandError(f"{path}:{exc.lineno}: {exc.msg}") from None
    kept = [node for node in tree.body if _runs(node)]
    skipped = {name: node.lineno for node in tree.body if not _runs(node) for name in _names_set(node)}
    module = types.ModuleType("tilecraft_loaded_" + re.sub(r"\W", "_", path.stem))
    module.__file__ = str(path.resolve())
    sys.modules[module.__name__] = module  # dataclasses look their module up by name
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        exec(compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec"), module.__dict__)
    except Exception as exc:  # the user's file failed: show where in it, not our frames
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        where = f"{path}:{frames[-1].lineno}: " if frames else f"{path}: "
        raise CommandError(f"{where}loading the file failed: {type(exc).__name__}: {exc}") from None
    return LoadedFile(path, module.__dict__, skipped)


def _runs(node: ast.stmt) -> bool:
    """Whether the top-level statement `node` defines things only (see the module doc)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(node, ast.Expr):  # docstrings and other constants
        return isinstance(node.value, ast.Constant)
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return node.value is None or _calls_only_kernel(node.value)
    if isinstance(node, ast.If):
        return _calls_only_kernel(node.test) and all(_runs(s) for s in node.body + node.orelse)
    if isinstance(node, ast.Try):
        handlers = [s for h in node.handlers for s in h.body]
        return all(_runs(s) for s in node.body + handlers + node.orelse + node.finalbody)
    return False


def _calls_only_kernel(expr: ast.expr) -> bool:
    """Whether evaluating `expr` calls nothing but `kernel` (as in `ct.kernel(fn)`)."""
    return all(_is_kernel_factory(n.func) for n in ast.walk(expr) if isinstance(n, ast.Call))


def _is_kernel_factory(func: ast.expr) -> bool:
    if isinstance(func, ast.Call):  # ct.kernel(num_warps=4)(fn)
        return _is_kernel_factory(func.func)
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in _KERNEL_FACTORIES


def _names_set(node: ast.stmt) -> list[str]:
    """The names a (skipped) statement would have bound."""
    names = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(n.name)
    return names
