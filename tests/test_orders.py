"""Lane order and the odd/even network against scalar readings of design.md §6."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nxkernel_core.orders import depth, lane_reduce, odd_even_scan


def scalar_lane_sum(terms: list[np.float32]) -> np.float32:
    """Lane order read literally: one term at a time, then the lane and block trees."""
    zero = np.float32(0.0)
    blocks = []
    for b in range(0, len(terms), 1024):
        lanes = [zero] * 16
        for t, x in enumerate(terms[b : b + 1024]):
            lanes[t % 16] = np.float32(lanes[t % 16] + x)
        for i in range(8):
            lanes[i] = np.float32(lanes[i] + lanes[i + 8])
        for i in range(4):
            lanes[i] = np.float32(lanes[i] + lanes[i + 4])
        for i in range(2):
            lanes[i] = np.float32(lanes[i] + lanes[i + 2])
        blocks.append(np.float32(lanes[0] + lanes[1]))

    def tree(bs: list[np.float32]) -> np.float32:
        if len(bs) == 1:
            return bs[0]
        left = 1
        while left * 2 < len(bs):
            left *= 2
        return np.float32(tree(bs[:left]) + tree(bs[left:]))

    return tree(blocks) if blocks else zero


@settings(max_examples=40, deadline=None)
@given(n=st.sampled_from([0, 1, 15, 16, 17, 1023, 1024, 1025, 3000, 5121]), seed=st.integers(0, 2**32 - 1))
def test_lane_reduce_is_the_stated_order(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 6, n)).astype(np.float32)
    got = lane_reduce(x[None, :], np.add, 0.0)[0]
    assert got.tobytes() == scalar_lane_sum(list(x)).tobytes()


def test_lane_sum_of_negative_zeros_is_positive_zero() -> None:
    got = lane_reduce(np.full((1, 3), -0.0, np.float32), np.add, 0.0)[0]
    assert got == 0 and not np.signbit(got)


def _tree_scan(n: int) -> list[str]:
    """The network's expressions, read literally from the contract text."""
    states = [f"s{i}" for i in range(n)]

    def scan(s: list[str]) -> list[str]:
        if len(s) <= 1:
            return list(s)
        pairs = scan([f"({s[2 * j]}+{s[2 * j + 1]})" for j in range(len(s) // 2)])
        out = []
        for i in range(len(s)):
            if i == 0:
                out.append(s[0])
            elif i % 2 == 1:
                out.append(pairs[i // 2])
            else:
                out.append(f"({pairs[i // 2 - 1]}+{s[i]})")
        return out

    return scan(states)


def test_odd_even_network_matches_the_text_and_its_depth() -> None:
    for n in range(0, 40):
        states = np.array([f"s{i}" for i in range(n)], dtype=object)
        (got,) = odd_even_scan((states,), lambda a, b: (np.array([f"({x}+{y})" for x, y in
                                                                  zip(a[0], b[0], strict=True)],
                                                                 dtype=object),))
        expected = _tree_scan(n)
        assert list(got) == expected
        for i, expr in enumerate(expected):
            # Each term appears once, in order, and the nesting is within D(i).
            assert [t for t in expr.replace("(", " ").replace(")", " ").replace("+", " ").split()] == [
                f"s{k}" for k in range(i + 1)]
            assert expr.count("+") == i
            deepest = max(expr[: k + 1].count("(") - expr[: k + 1].count(")") for k in range(len(expr)))
            assert deepest <= depth(i)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 300), cut=st.integers(0, 300), seed=st.integers(0, 2**32 - 1))
def test_scan_of_a_prefix_is_the_prefix_of_the_scan(n: int, cut: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((2, n)).astype(np.float32)
    (whole,) = odd_even_scan((x,), lambda a, b: (a[0] + b[0],))
    k = min(cut, n)
    (prefix,) = odd_even_scan((x[:, :k].copy(),), lambda a, b: (a[0] + b[0],))
    assert prefix.tobytes() == whole[:, :k].tobytes()
