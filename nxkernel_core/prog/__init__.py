"""Programs: what a loop computes from one element of each of its operands.

The package's modules: ``kinds`` (the kinds and their domains), ``elements``
(one element's bits), ``nodes`` (the nodes and their checks), ``program``
(``Prog``), ``builder`` (``Builder``) and ``byteform`` (the bytes).

A program (``Prog``) is a list of nodes and a tuple of outputs. Node ``i``
refers only to nodes before it, by index:

- ``In(index)``: operand ``index`` at the loop's index, of dtype ``ins[index]``;
- ``Coord(axis)``: the loop's index along ``axis``, counted from the last
  axis (0 is the last), as an int64;
- ``Const(dtype, bits)``: one element, its bits little-endian, a sub-byte
  element in the low bits of one byte;
- ``Op1(kind, dtype, x)``: a unary kind (``Unary``) or a conversion
  (``Convert``: Copy, Cast, Bitcast) of node ``x`` into ``dtype``;
- ``Op2(kind, x, y)``: a ``Binary`` or ``Compare`` kind of two nodes of one
  dtype;
- ``Op3(kind, c, x, y)``: ``Where`` (``x`` where the bool ``c`` holds, else
  ``y``) or ``Fma`` (``c * x + y`` with one rounding).

Each node's value is its exact result rounded once to the node's dtype
(``nxkernel_core.evaluator`` computes it exactly). ``Fill`` and ``Iota``
(``Nullary``) are not nodes: ``Prog.fill`` is a program of one ``Const`` and
``Prog.iota`` a ``Coord`` cast to the dtype; they keep their domains.

A program is immutable and validated when made; it serialises to bytes
(``to_bytes``), and two programs are equal, and hash alike, iff their bytes
are equal. Build one with ``Prog.build`` and arithmetic on its values::

    b = Prog.build([D.float32, D.float32])
    x, y = b.ins
    p = b.finish(b.exp(x) * y + 1.0)
"""

from .builder import Builder, Value
from .elements import Scalar, bits, element, short_name
from .kinds import (
    TRANSCENDENTAL,
    Binary,
    Compare,
    Convert,
    Nullary,
    Op1Kind,
    Op2Kind,
    Ternary,
    Unary,
    accepts,
)
from .nodes import MAX_OPERANDS, Const, Coord, In, Node, Op1, Op2, Op3, operands_of
from .program import Prog

__all__ = [
    "MAX_OPERANDS",
    "TRANSCENDENTAL",
    "Binary",
    "Builder",
    "Compare",
    "Const",
    "Convert",
    "Coord",
    "In",
    "Node",
    "Nullary",
    "Op1",
    "Op1Kind",
    "Op2",
    "Op2Kind",
    "Op3",
    "Prog",
    "Scalar",
    "Ternary",
    "Unary",
    "Value",
    "accepts",
    "bits",
    "element",
    "operands_of",
    "short_name",
]
