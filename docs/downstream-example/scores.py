"""A downstream module: softmax scores of rows, computed by nxkernel on any
device."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from nxkernel_core import nx
from nxkernel_core.array import Array
from nxkernel_core.rig import Rig


def row_scores(rows: npt.ArrayLike, device: Rig | str = "host") -> Array:
    """The softmax of each row of ``rows`` (float32), on ``device``."""
    x = nx.asarray(np.asarray(rows, dtype=np.float32), device=device)
    return nx.softmax(x, axis=-1)


def row_totals(rows: npt.ArrayLike, device: Rig | str = "host") -> Array:
    """The sum of each row of ``rows`` (float32), on ``device``."""
    return nx.sum(nx.asarray(np.asarray(rows, dtype=np.float32), device=device), axis=1)
