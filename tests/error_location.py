"""Checks that a compile error points at the right place: the kernel's file, the marked line,
the line's text and a caret under it (shared by the error tests of every directory)."""

from __future__ import annotations

import inspect
from typing import Any


def line_of(fn: Any, marker: str) -> int:
    """The line number of the first line of `fn`'s source containing `marker`."""
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if marker in text)


def check_error(excinfo: Any, fn: Any, marker: str, *, col_text: str | None = None) -> None:
    """The message names fn's file and the marked line, shows it, and puts a caret under it
    (under `col_text` when given)."""
    import tilecraft as ct
    err = excinfo.value
    line = line_of(fn, marker)
    path = inspect.getsourcefile(fn)
    assert isinstance(err, ct.TileError)
    assert err.loc is not None and err.loc.line == line, (err.loc, line)
    assert err.loc.file == path
    text = str(err)
    assert f"{path}" in text and f"line {line}" in text
    rendered = text.splitlines()
    caret_row = next(i for i, r in enumerate(rendered) if r.strip() == "^")
    assert marker in rendered[caret_row - 1]
    if col_text is not None:
        code_row = rendered[caret_row - 1]
        assert code_row[rendered[caret_row].index("^"):].startswith(col_text), (code_row, rendered[caret_row])


def check_nth_marked_error(excinfo: Any, fn: Any, n: int) -> None:
    """check_error at the n-th line of `fn` marked `# ERR` (kernels holding several error cases)."""
    lines = [line for line in inspect.getsourcelines(fn)[0] if "# ERR" in line]
    check_error(excinfo, fn, lines[n].strip())
