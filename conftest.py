"""Project-wide pytest setup: the `cuda` marker skips, with its reason, where
no CUDA GPU is present."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _no_gpu_reason() -> str | None:
    try:
        import cupy  # type: ignore[import-not-found]
    except Exception as exc:
        return f"CuPy is not importable ({exc.__class__.__name__}: {exc})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device is present"
    except Exception as exc:
        return f"no CUDA device is usable ({exc})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    for item in items:
        if item.get_closest_marker("cuda") is None:
            continue
        reason = reason or _no_gpu_reason()
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"cuda: {reason}"))
