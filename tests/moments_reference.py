"""The stated Moments scan, as a reference for the libraries' tests: the
odd/even network (``orders.odd_even_scan``) over Chan's merge of (count,
mean, M2) states, in float64, vectorised over rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from nxkernel_core import orders

__all__ = ["chan_merge", "moments_network"]

Arr = npt.NDArray[Any]


def chan_merge(a: tuple[Arr, ...], b: tuple[Arr, ...]) -> tuple[Arr, ...]:
    """The stated Moments merge of (count, mean, M2) states, element by
    element: a state of count 0 gives the other one; a non-finite mean makes
    the mean ``ma + mb`` and M2 NaN."""
    na, ma, qa = a
    nb, mb, qb = b
    with np.errstate(all="ignore"):
        n = na + nb
        d = mb - ma
        w = nb / n
        finite = np.isfinite(ma) & np.isfinite(mb)
        mean = np.where(finite, ma + d * w, ma + mb)
        m2 = np.where(finite, qa + qb + d * d * (na * w), np.nan)
    first, second = na == 0, (nb == 0) & (na != 0)
    return (np.where(first, nb, np.where(second, na, n)), np.where(first, mb, np.where(second, ma, mean)),
            np.where(first, qb, np.where(second, qa, m2)))


def moments_network(x: Arr, carry: Arr | None = None) -> tuple[Arr, Arr]:
    """The stated Moments scan of float64 rows ``x`` (after each row's
    ``carry`` (count, mean, variance) where given): each prefix's mean and
    variance."""
    with np.errstate(all="ignore"):
        states: tuple[Arr, ...] = (np.ones_like(x), x.copy(), np.where(np.isfinite(x), 0.0, np.nan))
        if carry is not None:
            c = carry.astype(np.float64)
            states = tuple(np.concatenate([f[:, None], s], axis=1)
                           for f, s in zip((c[:, 0], c[:, 1], c[:, 2] * c[:, 0]), states, strict=True))
        n, mean, m2 = orders.odd_even_scan(states, chan_merge)
        var = m2 / n
    if carry is not None:
        return mean[:, 1:], var[:, 1:]
    return mean, var
