"""LLVM IR vectors for the host library's Numba intrinsics (``lanedots``'
products, ``lanes``' chains): a float dtype's vector type of a given width
and the operations the kernels write with it (a scalar broadcast, a mask of
the first lanes, plain and masked loads and stores, a fused multiply-add).

Rule: each operation is the IEEE operation per lane, rounded as its scalar
twin would be (``llvm.fma`` always fused), so a chain kept in one lane of a
vector gives the bits of the same chain computed one element at a time.
"""

from __future__ import annotations

from typing import Any, Final

from llvmlite import ir
from numba.core import cgutils as numba_cgutils

__all__ = ["I1", "I32", "I64", "Vectors", "cgutils"]

#: Numba's code-generation helpers (untyped for the checker).
cgutils: Final[Any] = numba_cgutils

I1: Final = ir.IntType(1)
I32: Final = ir.IntType(32)
I64: Final = ir.IntType(64)


class Vectors:
    """LLVM types and intrinsics for vectors of ``nbytes`` (W lanes) of one
    float dtype, in the module being generated."""

    def __init__(self, context: Any, builder: Any, dtype: Any, nbytes: int) -> None:
        self.builder = builder
        self.size = dtype.bitwidth // 8
        self.w = nbytes // self.size
        self.fty = context.get_value_type(dtype)
        self.vty = ir.VectorType(self.fty, self.w)
        self.ptr = self.vty.as_pointer()
        self.mty = ir.VectorType(I1, self.w)
        name = f"v{self.w}f{dtype.bitwidth}"
        module = builder.module
        self._fma = cgutils.get_or_insert_function(
            module, ir.FunctionType(self.vty, [self.vty] * 3), f"llvm.fma.{name}")
        self._load = cgutils.get_or_insert_function(
            module, ir.FunctionType(self.vty, [self.ptr, I32, self.mty, self.vty]),
            f"llvm.masked.load.{name}.p0{name}")
        self._store = cgutils.get_or_insert_function(
            module, ir.FunctionType(ir.VoidType(), [self.vty, self.ptr, I32, self.mty]),
            f"llvm.masked.store.{name}.p0{name}")

    def splat(self, value: float | Any) -> Any:
        """A vector of ``value`` in every lane (a constant or a scalar)."""
        if isinstance(value, float):
            return ir.Constant(self.vty, [ir.Constant(self.fty, value)] * self.w)
        b = self.builder
        one = b.insert_element(ir.Constant(self.vty, None), value, ir.Constant(I32, 0))
        return b.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, self.w), [0] * self.w))

    def mask(self, count: Any) -> Any:
        """Lanes ``l < count`` (a signed int64; ≤ 0 gives none)."""
        b = self.builder
        lanes = ir.Constant(ir.VectorType(I64, self.w), list(range(self.w)))
        wide = b.insert_element(ir.Constant(ir.VectorType(I64, self.w), None), count,
                                ir.Constant(I32, 0))
        wide = b.shuffle_vector(wide, wide, ir.Constant(ir.VectorType(I32, self.w), [0] * self.w))
        return b.icmp_signed("<", lanes, wide)

    def load(self, ptr: Any, mask: Any | None) -> Any:
        """The W elements at ``ptr`` (a scalar pointer); with a mask, only its
        lanes are read, the others 0."""
        b = self.builder
        vp = b.bitcast(ptr, self.ptr)
        if mask is None:
            return b.load(vp, align=self.size)
        return b.call(self._load, [vp, ir.Constant(I32, self.size), mask, self.splat(0.0)])

    def store(self, value: Any, ptr: Any, mask: Any | None) -> None:
        """Write the lanes of ``value`` at ``ptr`` (with a mask, its lanes only)."""
        b = self.builder
        vp = b.bitcast(ptr, self.ptr)
        if mask is None:
            b.store(value, vp, align=self.size)
        else:
            b.call(self._store, [value, vp, ir.Constant(I32, self.size), mask])

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        """``a·b + c`` per lane, rounded once."""
        return self.builder.call(self._fma, [a, b, c])
