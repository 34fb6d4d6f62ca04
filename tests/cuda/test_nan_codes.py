"""The NaN codes a GPU gives where it fixes them, on every device: a float32
operation with a NaN result gives the quiet NaN 0x7fffffff whatever its
operands' payloads (CUDA C++ Programming Guide, "Floating-Point Standard"),
and the conversion of float32 into bfloat16 and float16 codes gives 0x7FFF
(``cvt.rn.bf16x2.f32``, ``cvt.rn.f16x2.f32``). The emulator gives them where
the source names the operation (``kernels/nan_codes.cu``); for C++'s
operators on floats and for float64 it keeps x86's NaN (see
``emulator/README.md``), which the contract allows: only a move fixes a NaN
result's bits."""

from __future__ import annotations

import numpy as np

from nxkernel_core.array import Array
from nxkernel_cuda.build import Source
from nxkernel_cuda.device import CudaRig

from .probe import PROBE_FILE
from .support import needs_nvrtc

SOURCE = Source("nan_codes.cu", (PROBE_FILE.parent / "nan_codes.cu").read_text(), ("nan_codes",))

#: The operands: a quiet NaN with a payload and its sign set, a signalling
#: NaN, then 1, 0, +inf and -1; and a float64 NaN with a payload.
F32 = np.array([0xFFC01234, 0x7F800001], np.uint32).view(np.float32)
NUMBERS = np.array([1.0, 0.0, np.inf, -1.0], np.float32)
F64 = np.array([0x7FF8000000ABCDEF], np.uint64).view(np.float64)

CANONICAL = 0x7FFFFFFF
WANT = [CANONICAL] * 10 + [
    0x3F80 << 16 | 0x7FFF,  # bfloat16: lo the NaN's 0x7FFF, hi 1.0
    0x7FFF << 16 | 0x3C00,  # float16: lo 1.0, hi the NaN's 0x7FFF
]


def test_float32_operations_and_narrowing_conversions_give_the_gpus_nan(dev: CudaRig) -> None:
    f = Array.from_numpy(np.concatenate([F32, NUMBERS]), dev)
    d = Array.from_numpy(F64, dev)
    out = Array.from_numpy(np.zeros(len(WANT), np.uint32), dev)
    dev.load(SOURCE).function("nan_codes")(1, 32, [dev.pointer(f.buffer), dev.pointer(d.buffer),
                                                    dev.pointer(out.buffer)])
    got = [int(v) for v in out.to_numpy()]
    assert got == WANT, [f"{v:#010x}" for v in got]


@needs_nvrtc
def test_the_nan_probe_compiles_for_the_gpu() -> None:
    from nxkernel_cuda import build

    assert set(build.compile(SOURCE, "sm_90").lowered) == set(SOURCE.kernels)
