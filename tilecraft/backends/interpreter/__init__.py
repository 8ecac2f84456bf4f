"""NumPy interpreter of Tile IR (CPU): the reference semantics of the language."""

from .backend import InterpretedKernel, InterpreterBackend

__all__ = ["InterpreterBackend", "InterpretedKernel"]
