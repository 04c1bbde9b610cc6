"""Why a GFM solve stopped: reason codes, :class:`Status` and the reports every solver returns.

Every stop has a reason code (:data:`REASONS`) and a :class:`Status`: only ``converged``
reached ``tol``; ``stalled``, ``max_iters``, ``diverged`` and ``invalid_start`` did not.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

__all__ = [
    "CONVERGED_CODES",
    "MatrixFreeReport",
    "REASONS",
    "RUNNING",
    "STATUS_OF_CODE",
    "SolveReport",
    "Status",
]

RUNNING = -1
REASONS: dict[int, str] = {
    0: "converged: residual norm <= tol",
    1: "max_iters reached before the residual norm fell below tol",
    2: "non-finite residual at the initial path (metric not SPD or potential not finite)",
    3: "stalled: steps became negligible before reaching tol (tol below attainable precision "
    "or a local minimum of the residual)",
    4: "stalled: no step decreases the residual (damping / line search exhausted)",
    5: "stationary: gradient of the energy below gtol",
    6: "diverged: the path or residual became non-finite during the solve (the report names the "
    "iteration and waypoint); the last finite path is returned",
    7: "stalled: at the rate of the last iterations the residual would not reach tol within "
    "max_iters (slow linear convergence, e.g. to a local minimum of the residual at a "
    "discontinuity of the force)",
}
CONVERGED_CODES = (0, 5)


class Status(enum.StrEnum):
    """What a solve's reason code means, in four words (a string enum: ``status == "stalled"``).

    Only ``CONVERGED`` reached its tolerance; ``STALLED`` (the solver gave up short of ``tol``:
    negligible steps, no decreasing step, or too slow to finish) is never counted as converged.
    """

    CONVERGED = "converged"
    """Residual norm <= tol (codes 0, 5)."""
    STALLED = "stalled"
    """Stopped short of tol because progress stopped or became too slow (codes 3, 4, 7)."""
    MAX_ITERS = "max_iters"
    """Ran out of iterations while still progressing (code 1)."""
    DIVERGED = "diverged"
    """The path or residual became non-finite during the solve (code 6)."""
    INVALID_START = "invalid_start"
    """Non-finite residual at the initial path (code 2)."""


STATUS_OF_CODE: dict[int, Status] = {
    0: Status.CONVERGED,
    5: Status.CONVERGED,
    1: Status.MAX_ITERS,
    3: Status.STALLED,
    4: Status.STALLED,
    7: Status.STALLED,
    6: Status.DIVERGED,
    2: Status.INVALID_START,
}


@dataclasses.dataclass(frozen=True)
class SolveReport:
    """Outcome of a solve; for a batch every field except ``wall_time`` is an array over pairs.

    Attributes:
        iterations: optimiser iterations taken (LM counts rejected trial steps too).
        residual: final ``sqrt(mean_i r_i^T G(x_i) r_i)`` (GFM) or ``sqrt(mean_i |e_i|^2)``.
        converged: residual reached ``tol`` (or, for energies, the gradient reached ``gtol``);
            the same as ``status == "converged"``.
        code: the reason code, a key of :data:`REASONS`.
        wall_time: seconds of the whole (batched) solve, compilation included on a first call.
        method: the method used.
        tol, lam, n_points: the tolerance, potential weight and waypoint count the solve used
            (its defaults resolved); ``None`` from solvers that do not record them.
        bad_iteration, bad_waypoint: for a solve that diverged (code 6), the iteration at which
            the path or residual became non-finite and the first offending waypoint; -1
            otherwise (and ``None`` where a solver does not track them).
        on_support: whether the path stayed on the model's data support, from the score alone
            (:mod:`geomopt.gfm._support`): ``support_max <= support_threshold``. ``None`` when
            the check could not run (no score, or a score whose noise level is unknown:
            ``support_note`` says which); never a silent ``True``. Independent of
            ``converged``: a converged path can leave the support, and :attr:`reason` says so.
        support_max: the largest ``sigma |s(x)|`` (Tweedie's ``|D(x, sigma) - x|`` in units of
            ``sigma``) over the waypoints and segment midpoints of the returned path.
        support_where: where that largest value is, an index into the waypoints and midpoints
            interleaved (even ``2i``: waypoint ``i``; odd ``2i + 1``: the midpoint of waypoints
            ``i`` and ``i + 1``).
        support_sigma, support_threshold: the noise level and the threshold (units of sigma)
            the check used; ``support_note``: why the check did not run (``None`` if it ran).
    """

    iterations: np.ndarray
    residual: np.ndarray
    converged: np.ndarray
    code: np.ndarray
    wall_time: float
    method: str
    bad_iteration: np.ndarray | None = None
    bad_waypoint: np.ndarray | None = None
    tol: float | None = None
    lam: float | None = None
    n_points: int | None = None
    on_support: np.ndarray | None = None
    support_max: np.ndarray | None = None
    support_where: np.ndarray | None = None
    support_sigma: float | None = None
    support_threshold: float | None = None
    support_note: str | None = None

    @property
    def status(self):
        """:class:`Status` of the solve (a NumPy object array of them for a batch)."""
        codes = np.asarray(self.code)
        if codes.ndim == 0:
            return STATUS_OF_CODE[int(codes)]
        out = np.empty(codes.shape, object)
        for i, c in np.ndenumerate(codes):
            out[i] = STATUS_OF_CODE[int(c)]
        return out

    @property
    def support(self):
        """``"on"`` / ``"off"`` (the path left the model's data support) / ``"unknown"`` (the
        check could not run: :attr:`support_note`); a list for a batch."""
        codes = np.asarray(self.code)
        if self.on_support is None:
            words = ["unknown"] * codes.size
        else:
            words = ["on" if b else "off" for b in np.asarray(self.on_support).ravel()]
        return words[0] if codes.ndim == 0 else words

    def _reason(self, code, bad_it, bad_wp, on, peak, where) -> str:
        text = REASONS[int(code)]
        if int(code) == 6 and bad_it is not None and int(bad_it) >= 0:
            text += f" [iteration {int(bad_it)}, waypoint {int(bad_wp)}]"
        if on is None:
            return text + f"; support not checked ({self.support_note})"
        if not on:
            from ._support import describe_support_point

            lead = "; but" if int(code) in CONVERGED_CODES else ";"
            text += (
                f"{lead} OFF THE DATA SUPPORT: sigma |s(x)| = {float(peak):.3g} > "
                f"{self.support_threshold:g} at {describe_support_point(where)} "
                f"(sigma {self.support_sigma:g})"
            )
        return text

    @property
    def reason(self):
        """Human-readable reason(s) for stopping, and whether the path left the data support
        (``"...; but OFF THE DATA SUPPORT: ..."`` for a converged path that left it)."""
        codes = np.asarray(self.code)
        n = codes.size

        def per_pair(a):
            return [None] * n if a is None else list(np.asarray(a).ravel())

        cols = zip(codes.ravel(), per_pair(self.bad_iteration), per_pair(self.bad_waypoint),
                   per_pair(self.on_support), per_pair(self.support_max),
                   per_pair(self.support_where), strict=True)  # fmt: skip
        texts = [self._reason(*c) for c in cols]
        return texts[0] if codes.ndim == 0 else texts

    def __str__(self) -> str:
        """One line per pair: support (on / off / unknown) and :attr:`reason`."""
        support, reason = self.support, self.reason
        if np.ndim(self.code) == 0:
            return f"[support {support}] {reason}"
        return "\n".join(
            f"pair {i} [support {su}] {r}"
            for i, (su, r) in enumerate(zip(support, reason, strict=True))
        )

    def __getitem__(self, i) -> SolveReport:
        """The report of pair ``i`` of a batched solve."""
        pick = lambda a: None if a is None else np.asarray(a)[i]  # noqa: E731
        return SolveReport(
            np.asarray(self.iterations)[i],
            np.asarray(self.residual)[i],
            np.asarray(self.converged)[i],
            np.asarray(self.code)[i],
            self.wall_time,
            self.method,
            pick(self.bad_iteration),
            pick(self.bad_waypoint),
            self.tol,
            self.lam,
            self.n_points,
            pick(self.on_support),
            pick(self.support_max),
            pick(self.support_where),
            self.support_sigma,
            self.support_threshold,
            self.support_note,
        )


@dataclasses.dataclass(frozen=True)
class MatrixFreeReport(SolveReport):
    """:class:`~geomopt.gfm.SolveReport` plus ``cg_iterations``: the solve's Krylov steps, GMRES
    steps of the Newton phase (one JVP of the residual each) plus CG steps of the LM phase (one
    JVP and one VJP each)."""

    cg_iterations: np.ndarray = dataclasses.field(default_factory=lambda: np.asarray(0))

    def __getitem__(self, i) -> MatrixFreeReport:
        """The report of pair ``i`` of a batched solve."""
        base = super().__getitem__(i)
        return MatrixFreeReport(
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(SolveReport)},
            cg_iterations=np.asarray(self.cg_iterations)[i],
        )
