"""AST rewrites that remove early exits, so the IR needs only structured control flow.

- `return` inside an `if`: the statements after the `if` move into the branch that does not
  return, so every `return` ends its statement list.
- `break` / `continue` in a loop become assignments to the hidden flags `$break` / `$continue`;
  statements after one that may set a flag run under `if not ($break or $continue)`, a `for` body
  runs under `if not $break`, and a `while` test becomes `not $break and <test>`; a `with` body
  is treated like an `if` body (its cleanup runs however the body ends).
- `return` inside a `while` loop (cuTile allows it there, not in a `for` loop): it stores its
  value in `$loopret`, sets `$returning` and breaks; after the loop, `if $returning: return
  $loopret` (so a `return` in nested `while` loops breaks out of each).
- `return` inside a `with`: the statements after the `with` move to the end of its body behind
  an `ExitWith` (leaving the `with`), so each path runs the cleanup once: at its `return`, or at
  the `ExitWith`.
"""

from __future__ import annotations

import ast

from ..errors import Location, TileSyntaxError

BREAK = "$break"
CONTINUE = "$continue"
RETVAL = "$retval"
LOOPRET = "$loopret"
RETURNING = "$returning"


class WithStep(ast.stmt):
    """A pseudo-statement acting on the `with` statement `node` (located there)."""

    _fields = ()

    def __init__(self, node: ast.With) -> None:
        super().__init__()
        self.node = node
        ast.copy_location(self, node)


class EnterWith(WithStep):
    """Enter the managers of `node` (a generator's `with` that holds its `yield` is opened into
    entry, body and exit)."""


class ExitWith(WithStep):
    """Leave `node`: run its managers' cleanups."""


def _name(id_: str, ctx: ast.expr_context, like: ast.AST) -> ast.Name:
    return ast.copy_location(ast.Name(id=id_, ctx=ctx), like)


def _assign(id_: str, value: bool, like: ast.AST) -> ast.Assign:
    node = ast.Assign(targets=[_name(id_, ast.Store(), like)], value=ast.copy_location(ast.Constant(value), like))
    return ast.copy_location(node, like)


def _not_any(ids: list[str], like: ast.AST) -> ast.expr:
    names = [_name(i, ast.Load(), like) for i in ids]
    test = names[0] if len(names) == 1 else ast.copy_location(ast.BoolOp(op=ast.Or(), values=names), like)
    return ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=test), like)


def _always_returns(stmts: list[ast.stmt]) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, ast.With):
        return _always_returns(last.body)
    return False


def _find(stmts: list[ast.stmt], kinds: tuple[type, ...]) -> ast.stmt | None:
    """The first statement of `kinds` at this loop level (not inside nested loops/defs)."""
    for s in stmts:
        if isinstance(s, kinds):
            return s
        nested = [s.body, s.orelse] if isinstance(s, ast.If) else [s.body] if isinstance(s, ast.With) else []
        for body in nested:
            found = _find(body, kinds)
            if found is not None:
                return found
    return None


def _returns_inside(stmts: list[ast.stmt]) -> bool:
    """Whether a `return` of this function occurs in `stmts` outside `for` loops and `with`
    bodies (which keep their own rules); nested definitions do not count."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and (_returns_inside(s.body) or _returns_inside(s.orelse)):
            return True
        if isinstance(s, ast.While) and _returns_inside(s.body):
            return True
    return False


def _contains(stmts: list[ast.stmt], kinds: tuple[type, ...]) -> bool:
    """Whether a statement of `kinds` occurs at this loop level (not inside nested loops/defs)."""
    return _find(stmts, kinds) is not None


class Rewriter:
    def __init__(self, filename: str, function: str) -> None:
        self.filename = filename
        self.function = function

    def _error(self, msg: str, node: ast.AST) -> TileSyntaxError:
        return TileSyntaxError(msg, Location(self.filename, node.lineno, node.col_offset, self.function))

    # ---- returns ------------------------------------------------------------------------------------
    def returns(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """Move statements after a returning branch into the other branch (recursively)."""
        out: list[ast.stmt] = []
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                out.append(s)
                return out  # anything after a return is dead
            if isinstance(s, ast.While) and _returns_inside(s.body):
                return out + self.returns(self._lift_returns(s) + stmts[i + 1:])
            if isinstance(s, (ast.For, ast.While)):
                self._reject_return_in_loop(s)
                s.body = self.loop_body(s)
                out.append(s)
                continue
            if isinstance(s, ast.If):
                rest = stmts[i + 1:]
                body_ret, else_ret = _always_returns(s.body), _always_returns(s.orelse)
                if rest and (body_ret or else_ret or self._may_return(s)):
                    if not body_ret:
                        s.body = s.body + rest
                    if not else_ret:
                        s.orelse = s.orelse + rest
                    rest = []
                s.body = self.returns(s.body)
                s.orelse = self.returns(s.orelse)
                out.append(s)
                if not rest:
                    return out
                continue
            if isinstance(s, ast.With) and self._may_return(s):
                # every path out of the body ends in a return (which runs the cleanups) or in
                # leaving the `with`, followed by the statements after it
                s.body = self.returns(s.body + [ExitWith(s)] + stmts[i + 1:])
                s.tc_exits_inside = True  # type: ignore[attr-defined]
                out.append(s)
                return out
            if isinstance(s, ast.With):
                s.body = self.returns(s.body)
            out.append(s)
        return out

    def _lift_returns(self, loop: ast.While) -> list[ast.stmt]:
        """`loop` with each `return` in it turned into a break that records the value, between
        the initialization of `$returning` and the `return` it triggers after the loop."""
        loop.body = self._returns_to_breaks(loop.body)
        check = ast.If(test=_name(RETURNING, ast.Load(), loop), body=[
            ast.copy_location(ast.Return(value=_name(LOOPRET, ast.Load(), loop)), loop)], orelse=[])
        return [_assign(RETURNING, False, loop), loop, ast.copy_location(check, loop)]

    def _returns_to_breaks(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            if isinstance(s, ast.Return):
                value = s.value if s.value is not None else ast.copy_location(ast.Constant(None), s)
                store = ast.copy_location(ast.Assign(targets=[_name(LOOPRET, ast.Store(), s)], value=value), s)
                out += [store, _assign(RETURNING, True, s), ast.copy_location(ast.Break(), s)]
            elif isinstance(s, ast.While) and _returns_inside(s.body):
                out += self._returns_to_breaks(self._lift_returns(s))
            elif isinstance(s, ast.If):
                s.body, s.orelse = self._returns_to_breaks(s.body), self._returns_to_breaks(s.orelse)
                out.append(s)
            else:
                out.append(s)
        return out

    def _may_return(self, s: ast.If | ast.With) -> bool:
        return any(isinstance(n, ast.Return) for n in ast.walk(s))

    def _reject_return_in_loop(self, loop: ast.For | ast.While) -> None:
        kind = "for" if isinstance(loop, ast.For) else "while"
        for s in loop.body:
            for n in ast.walk(s):
                if isinstance(n, ast.Return):
                    raise self._error(f"Returning from a {kind} loop is not supported", n)

    # ---- break / continue ---------------------------------------------------------------------------
    def loop_body(self, loop: ast.For | ast.While) -> list[ast.stmt]:
        """Rewrite `loop`'s body; flags it with `.tc_break` when it has a break, and keeps its
        first break and continue as `.tc_break_at` / `.tc_continue_at` (a static_iter loop,
        unrolled, has neither)."""
        if loop.orelse:
            raise self._error(f"{type(loop).__name__.lower()}-else is not supported", loop)
        loop.tc_break_at = _find(loop.body, (ast.Break,))  # type: ignore[attr-defined]
        loop.tc_continue_at = _find(loop.body, (ast.Continue,))  # type: ignore[attr-defined]
        has_break = loop.tc_break_at is not None  # type: ignore[attr-defined]
        has_continue = loop.tc_continue_at is not None  # type: ignore[attr-defined]
        flags = [f for f, used in ((BREAK, has_break), (CONTINUE, has_continue)) if used]
        body = self._exits(loop.body, flags)
        if has_continue:
            body = [_assign(CONTINUE, False, loop)] + body
        loop.tc_break = has_break  # type: ignore[attr-defined]
        return body

    def _exits(self, stmts: list[ast.stmt], flags: list[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Break):
                out.append(_assign(BREAK, True, s))
                return out
            if isinstance(s, ast.Continue):
                out.append(_assign(CONTINUE, True, s))
                return out
            if isinstance(s, (ast.For, ast.While)):
                s.body = self.loop_body(s)
                out.append(s)
                continue
            if isinstance(s, (ast.If, ast.With)):  # a `with` runs its cleanup however its body ends
                exits = _contains([s], (ast.Break, ast.Continue))
                s.body = self._exits(s.body, flags)
                if isinstance(s, ast.If):
                    s.orelse = self._exits(s.orelse, flags)
                out.append(s)
                rest = stmts[i + 1:]
                if exits and rest:
                    guard = ast.If(test=_not_any(flags, rest[0]), body=self._exits(rest, flags), orelse=[])
                    out.append(ast.copy_location(guard, rest[0]))
                    return out
                continue
            out.append(s)
        return out


def rewrite_function(fdef: ast.FunctionDef, filename: str) -> ast.FunctionDef:
    """Apply the rewrites to a function definition in place and return it."""
    fdef.body = Rewriter(filename, fdef.name).returns(fdef.body)
    return fdef
