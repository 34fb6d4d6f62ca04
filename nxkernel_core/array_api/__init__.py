"""nxkernel as an Array API namespace (the 2024.12 standard).

``xp = nxkernel_core.array_api`` (or ``x.__array_namespace__()`` of any
``Array``) holds every function, constant and dtype of the standard, the
``linalg`` and ``fft`` extensions and ``__array_namespace_info__``. Every
result is a kernel call through the caller ``nx`` (programs for the
elementwise functions, made once per dtype; reductions, scans, moves,
contractions, FFTs, the matrix routines); NumPy only carries values into and
out of device memory. The standard's ``sort`` returns the values; values
with positions stay ``nx.sort``.

Devices: ``device=`` takes a ``Rig`` or a name (``"cpu"``, ``"cuda"``,
``"cuda:N"``, ``"cuda-emu:N"``); ``default_device(...)`` is a context
manager, and ``NXKERNEL_DEFAULT_DEVICE`` sets the default for a process.
"""

from __future__ import annotations

import builtins
import math

from .. import dtype as _D
from ..array import Array
from ..rig import using as default_device

# _base, _creation, _dlpack and _indexing are reached from Array's methods as attributes.
from . import _base, _creation, _dlpack, _indexing, fft, linalg  # noqa: F401
from ._creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ._dtypes import can_cast, finfo, iinfo, isdtype, result_type
from ._elementwise import *  # noqa: F403 - the generated elementwise functions
from ._elementwise import __all__ as _elementwise_names
from ._elementwise import clip, conj, imag, real
from ._info import __array_namespace_info__
from ._manipulation import (
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    take,
    take_along_axis,
    tile,
    unstack,
)
from ._reductions import (
    all,
    any,
    argmax,
    argmin,
    count_nonzero,
    cumulative_prod,
    cumulative_sum,
    diff,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
    where,
)
from ._sets import (
    argsort,
    nonzero,
    searchsorted,
    sort,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from .linalg import matmul, matrix_transpose, tensordot, vecdot

__array_api_version__ = "2024.12"

bool = _D.bool_
int8, int16, int32, int64 = _D.int8, _D.int16, _D.int32, _D.int64
uint8, uint16, uint32, uint64 = _D.uint8, _D.uint16, _D.uint32, _D.uint64
float32, float64 = _D.float32, _D.float64
complex64, complex128 = _D.complex64, _D.complex128

e = math.e
inf = math.inf
nan = math.nan
newaxis = None
pi = math.pi


def astype(x: Array, dtype: _D.Dtype, /, *, copy: builtins.bool = True, device: object = None) -> Array:
    """x converted to ``dtype`` by the Cast kernel (a copy unless ``copy=False``
    and nothing changes), on ``device`` where given."""

    a = _base.the_array("xp.astype", x)
    if not isinstance(dtype, _D.Dtype):
        raise TypeError(f"xp.astype: {dtype!r} is not a dtype")
    out = _base.cast("xp.astype", a, dtype)
    if out is a and copy:
        out = _base.copy("xp.astype", a)
    if device is not None:
        from ._creation import to_device

        out = to_device("xp.astype", out, _base.device_of(device))
    return out


__all__ = [
    "Array", "__array_api_version__", "__array_namespace_info__", "abs", "arange", "argmax",
    "argmin", "argsort", "asarray", "astype", "broadcast_arrays", "broadcast_to", "can_cast",
    "clip", "complex64", "complex128", "concat", "conj", "count_nonzero", "cumulative_prod",
    "cumulative_sum", "default_device", "diff", "e", "empty", "empty_like", "expand_dims", "eye",
    "fft", "finfo", "flip", "float32", "float64", "from_dlpack", "full", "full_like", "iinfo",
    "imag", "inf", "int8", "int16", "int32", "int64", "isdtype", "linalg", "linspace", "matmul",
    "matrix_transpose", "max", "mean", "meshgrid", "min", "moveaxis", "nan", "newaxis", "nonzero",
    "ones", "ones_like", "permute_dims", "pi", "prod", "real", "repeat", "reshape", "result_type",
    "roll", "searchsorted", "sort", "squeeze", "stack", "std", "sum", "take", "take_along_axis",
    "tensordot", "tile", "tril", "triu", "uint8", "uint16", "uint32", "uint64", "unique_all",
    "unique_counts", "unique_inverse", "unique_values", "unstack", "var", "vecdot", "where",
    "zeros", "zeros_like", "all", "any", "bool",
    *_elementwise_names,
]
