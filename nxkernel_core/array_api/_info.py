"""``__array_namespace_info__``: the namespace's capabilities, devices and dtypes."""

from __future__ import annotations

from typing import Any, final

from .. import dtype as D
from .. import plugins, rig
from ..dtype import Dtype
from . import _base as B
from . import _dtypes as T

__all__ = ["Info", "__array_namespace_info__"]


@final
class Info:
    """What the standard's inspection API answers."""

    __module__ = "nxkernel_core.array_api"

    def capabilities(self) -> dict[str, Any]:
        """Boolean indexing and data-dependent shapes are supported; arrays have up to 32 axes."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 32}

    def default_device(self) -> rig.Rig:
        """The device creation functions use where none is named."""
        return rig.default_device()

    def devices(self) -> list[rig.Rig]:
        """Every device open after plugin discovery, the host first."""
        plugins.discover()
        return list(rig.devices())

    def default_dtypes(self, *, device: Any = None) -> dict[str, Dtype]:
        """float64, complex128, int64 and int64 for indexing, on every device."""
        if device is not None:
            B.device_of(device)
        return {"real floating": D.float64, "complex floating": D.complex128,
                "integral": D.int64, "indexing": D.int64}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Dtype]:
        """The namespace's dtypes of ``kind`` (all for None), by name."""
        if device is not None:
            B.device_of(device)
        if kind is None:
            return dict(T.DTYPES)
        return {n: dt for n, dt in T.DTYPES.items() if T.isdtype(dt, kind)}


def __array_namespace_info__() -> Info:
    """The inspection object of the namespace."""
    return Info()
