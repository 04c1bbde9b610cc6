"""Continuation in the noise level: :func:`solve_continuation` solves at a large ``sigma`` (a
smoother, better-conditioned potential) and warm-starts each smaller one from the previous
solution. It calls :func:`geomopt.gfm.solve`, so it sits above the front."""

from __future__ import annotations

from collections.abc import Sequence

from ._evaluate import ScoreAt
from ._gfm import solve

__all__ = ["solve_continuation"]


def solve_continuation(x0, x1, *, model, sigmas: Sequence[float], init=None, **solve_kw):
    """Continuation in the noise level: ``gfm.solve`` with the score of ``model`` at each
    ``sigma`` in turn (largest first), each solve starting from the previous solution.

    A larger ``sigma`` smooths the potential (the force is weaker and varies more slowly), so
    its solution is easier to reach and lies near the smaller ``sigma``'s on-support solution.
    ``model`` has ``score(x, sigma)`` (an ``EDMDenoiser`` or analytic potential); the score is
    bound with :class:`geomopt.gfm.ScoreAt` (``sigma`` traced: no recompilation between
    levels). ``init`` and ``solve_kw`` are passed to the first / every solve. Returns
    ``(path, reports)`` with one :class:`~geomopt.gfm.SolveReport` per level; the last is the
    solve at ``sigmas[-1]``.
    """
    sig = [float(s) for s in sigmas]
    if not sig or any(not s > 0 for s in sig):
        raise ValueError(f"sigmas={sigmas}: expected a non-empty sequence of positive numbers")
    if any(b > a for a, b in zip(sig, sig[1:], strict=False)):
        raise ValueError(f"sigmas={sigmas}: expected a non-increasing sequence (large to small)")
    reports = []
    path = init
    for s in sig:
        path, rep = solve(x0, x1, score=ScoreAt(model, s), init=path, **solve_kw)
        reports.append(rep)
    return path, reports
