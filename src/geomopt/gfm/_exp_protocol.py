"""What the GFM experiments share: endpoint pairs on the manifold, initial paths, one solve per
method under the official protocol, and honest per-pair outcomes.

Methods (the names the headlines use): ``gfm`` (``gfm.solve``'s default solver on the GFM
residual), ``gfm_adam`` (the official Adam on the same residual), ``jacobian`` (score-Jacobian
energy), ``stein``, ``inverse_density`` (conformal 1/p), ``rbf``, ``land`` and ``linear``; the
baselines run with the official settings of :data:`geomopt.gfm.baselines.OFFICIAL`.

Every pair gets a **status**: ``converged`` (residual below tolerance), ``stalled`` (the solver
stopped above it: too slow, no decreasing step, iteration cap), ``diverged`` (non-finite path or
residual), ``budget`` (a fixed-budget Adam baseline, or ``gfm_adam`` at its official 1501
iterations, that finished finite: the official code has no convergence test) or ``none``
(linear). Independently of the status, the path is **on the
manifold** when it is finite and its largest distance to the true manifold is at most
``on_manifold_tol``. A pair **fails** when it is stalled, diverged or off the manifold: a path
that converges off the manifold is a failure in every table and figure. The validity check that
needs no true manifold is the denoiser's displacement ``|D(x, check_sigma) - x|`` along the path.
"""

from __future__ import annotations

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import baselines as bl
from ._evaluate import ScoreAt, path_metrics
from ._gfm import solve
from ._init import straight_line

__all__ = [
    "METHODS",
    "INITS",
    "sample_pairs",
    "initial_paths",
    "solve_method",
    "evaluate",
    "summarise",
    "status_of_codes",
    "failure_reasons",
]

METHODS = ("gfm", "gfm_adam", "jacobian", "stein", "inverse_density", "rbf", "land", "linear")
INITS = ("denoised", "chord", "slerp")
LABELS = {
    "gfm": "GFM (LM)",
    "gfm_adam": "GFM (Adam, official)",
    "jacobian": "score-Jacobian",
    "stein": "Stein",
    "inverse_density": "1/p conformal",
    "rbf": "RBF",
    "land": "LAND",
    "linear": "linear",
}
SOLVER_LABELS = {"default": "GFM", "action": "GFM (action)", "lm": "GFM (LM)"}
SOLVERS = ("default", "action", "lm")
"""GFM solvers an experiment can ask for: ``"default"`` is ``gfm.solve``'s default method."""


def label_of(method: str, cfg: dict | None = None) -> str:
    """A method's legend label; ``gfm`` names the run's ``gfm_solver`` (``lm`` for runs made
    before the option existed)."""
    if method == "gfm" and cfg is not None:
        return SOLVER_LABELS.get(cfg.get("gfm_solver", "lm"), "GFM")
    return LABELS.get(method, method)


CONVERGED, STALLED, DIVERGED = (0, 5), (1, 3, 4, 7), (2, 6)
MAX_ITERS = 1  # the iteration cap (a stall for LM, the official budget for gfm_adam)


def sample_pairs(manifold, n_pairs: int, key) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` endpoint pairs drawn independently from the clean manifold (noise 0)."""
    k0, k1 = jax.random.split(key)
    return (
        np.asarray(manifold.sample(k0, n_pairs, noise=0.0), np.float64),
        np.asarray(manifold.sample(k1, n_pairs, noise=0.0), np.float64),
    )


def initial_paths(kind: str, x0, x1, n_points: int, *, model=None, sigma_start: float = 0.5):
    """Initial paths ``(B, n_points, d)``: ``"chord"`` (straight line), ``"slerp"`` (about the
    origin, norm interpolated linearly) or ``"denoised"`` (the chord's interior waypoints moved
    onto the model's support by the PF-ODE from ``sigma_start`` to 0.002, EDM Heun, 5 steps; the
    endpoints stay)."""
    x0, x1 = jnp.asarray(x0), jnp.asarray(x1)
    if kind in ("chord", "linear"):
        return straight_line(x0, x1, n_points)
    if kind == "slerp":
        return bl.spherical(x0, x1, n_points)
    if kind == "denoised":
        from geomopt.diffusion import pf_ode_denoise

        if model is None:
            raise ValueError("init 'denoised' needs a model with denoise(x, sigma)")
        line = straight_line(x0, x1, n_points)
        b, k, d = line.shape
        inner = line[:, 1:-1].reshape(-1, d)
        moved = pf_ode_denoise(model.denoise, inner, sigma_start)
        moved = moved.astype(line.dtype).reshape(b, k - 2, d)
        return jnp.concatenate([line[:, :1], moved, line[:, -1:]], axis=1)
    raise ValueError(f"init {kind!r}: expected one of {INITS}")


def status_of_codes(codes, finite) -> np.ndarray:
    """Per-pair status strings of a solver's reason codes (see the module doc)."""
    codes = np.asarray(codes)
    out = np.where(np.isin(codes, CONVERGED), "converged", "stalled").astype(object)
    out[np.isin(codes, DIVERGED) | ~np.asarray(finite)] = "diverged"
    return out


def solve_method(
    method: str,
    x0,
    x1,
    *,
    model,
    sigma: float,
    lam: float,
    n_points: int,
    init: str = "denoised",
    fitted: dict | None = None,
    adam: dict | None = None,
    solver: str = "default",
) -> dict:
    """Solve all pairs with one method; returns ``paths`` (B, K, d), per-pair ``status``,
    ``code``, ``iterations``, the whole batch's ``seconds`` (compilation included) and, for
    ``"gfm"`` / ``"gfm_adam"``, the solve's ``report`` (its support check; ``None`` otherwise).

    ``init`` applies to GFM (the baselines start where the official code starts them);
    ``fitted`` holds the fitted ``rbf`` / ``land`` metrics; ``adam`` overrides the official
    Adam settings of GFM (``lr``, ``clip``, ``iters``); ``solver`` is ``gfm.solve``'s method for
    ``"gfm"``: ``"default"`` (no ``method`` argument: the default a user gets), ``"action"``
    (descent of the path action, then LM) or ``"lm"``."""
    b = len(x0)
    score = ScoreAt(model, sigma)
    t0 = time.perf_counter()
    rep = None
    if method in ("gfm", "gfm_adam"):
        path0 = initial_paths(init, x0, x1, n_points, model=model)
        if solver not in SOLVERS:
            raise ValueError(f"solver {solver!r}: expected one of {SOLVERS}")
        kw = {} if solver == "default" else dict(method=solver)
        if method == "gfm_adam":
            a = {"lr": 1e-3, "clip": 10.0, "iters": 1501, **(adam or {})}
            kw = dict(method="adam", lr=a["lr"], clip=a["clip"], max_iters=a["iters"])
        try:
            paths, rep = solve(x0, x1, score=score, lam=lam, n_points=n_points, init=path0, **kw)
        except ValueError:  # a non-finite score on the initial path
            rep = None
            paths = np.full((b, n_points, x0.shape[-1]), np.nan)
            codes, its = np.full(b, 2), np.zeros(b, int)
        else:
            codes, its = np.asarray(rep.code), np.asarray(rep.iterations)
        paths = np.asarray(paths)
        finite = np.isfinite(paths).all(axis=(1, 2))
        status = status_of_codes(codes, finite)
        if method == "gfm_adam":  # the official fixed budget: reaching it is not a stall
            status[(codes == MAX_ITERS) & finite] = "budget"
    elif method == "linear":
        paths = np.asarray(straight_line(jnp.asarray(x0), jnp.asarray(x1), n_points))
        codes, its = np.full(b, -1), np.zeros(b, int)
        status = np.array(["none"] * b, dtype=object)
    elif method in bl.OFFICIAL:
        o = bl.OFFICIAL[method]
        energy = bl.official_energy(
            method, metric=(fitted or {}).get(method), score=score, sigma=sigma
        )
        path0 = initial_paths(o["init"], x0, x1, n_points)
        paths, final, _, _ = bl.adam_path(
            energy, path0, lr=o["lr"], iters=o["iters"], cosine=o["cosine"]
        )
        paths = np.asarray(paths)
        finite = np.isfinite(paths).all(axis=(1, 2)) & np.isfinite(final)
        codes, its = np.where(finite, 1, 6), np.full(b, o["iters"])
        status = np.where(finite, "budget", "diverged").astype(object)
    else:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    return dict(
        paths=paths,
        status=status,
        code=np.asarray(codes),
        iterations=np.asarray(its),
        seconds=time.perf_counter() - t0,
        report=rep,
    )


def evaluate(
    paths, *, manifold, model, sigma: float, lam: float, check_sigma: float, tol: float
) -> dict:
    """Per-pair measures of solved paths ``(B, K, d)``: ``dist`` (B, K) to the true manifold,
    ``error_mean`` / ``error_max``, ``el_residual`` (GFM's Euler-Lagrange residual at ``sigma``,
    ``lam``), ``displacement_mean`` / ``_max`` (``|D(x, check_sigma) - x|``, needs no true
    manifold), ``finite`` and ``on_manifold`` (finite and ``error_max <= tol``)."""
    paths = jnp.asarray(paths)
    finite = np.asarray(jnp.all(jnp.isfinite(paths), axis=(1, 2)))
    safe = jnp.where(jnp.isfinite(paths), paths, 0.0)
    m = path_metrics(safe, manifold=manifold, score=ScoreAt(model, sigma), lam=lam)
    flat = safe.reshape(-1, safe.shape[-1])
    disp = np.asarray(_displacement(model, flat, jnp.asarray(check_sigma, flat.dtype)))
    disp = disp.reshape(paths.shape[:2])
    out = dict(
        dist=np.asarray(m["dist"]),
        error_mean=np.asarray(m["manifold_error_mean"]),
        error_max=np.asarray(m["manifold_error_max"]),
        el_residual=np.asarray(m["el_residual"]),
        prior_length=np.asarray(m["prior_length"]),
        displacement_mean=disp.mean(1),
        displacement_max=disp.max(1),
    )
    for k in out:
        bad = ~finite if out[k].ndim == 1 else ~finite[:, None]
        out[k] = np.where(bad, np.nan, out[k])
    out["finite"] = finite
    out["on_manifold"] = finite & (np.nan_to_num(out["error_max"], nan=np.inf) <= tol)
    return out


@eqx.filter_jit
def _displacement(model, x, sigma):
    den = jax.vmap(lambda p: model.denoise(p, sigma).astype(p.dtype))(x)
    return jnp.linalg.norm(den - x, axis=-1)


def failure_reasons(paths, status, codes, ev: dict, manifold, tol: float) -> list[str]:
    """Why each pair failed, in words (``"ok"`` for a success): ``"diverged"``, ``"iteration
    cap"``, ``"stalled: <reason>"`` (the solver's reason code) or, for a path that ended off the
    manifold (converged or not), where it went: ``"off: inside by 0.31"`` / ``"off: outside
    by 0.12"`` (the deepest waypoint's signed distance) and ``", through the hole"`` when a
    waypoint crosses a torus's central hole (cylindrical radius below ``R - r``)."""
    from ._status import REASONS

    out = []
    paths = np.asarray(paths)
    for i, st in enumerate(np.asarray(status)):
        code = int(np.asarray(codes)[i])
        if st == "diverged" or not ev["finite"][i]:
            out.append("diverged")
            continue
        words = []
        if st == "stalled":
            words.append("iteration cap" if code == MAX_ITERS else REASONS[code].split(" (")[0])
        if not ev["on_manifold"][i]:
            if hasattr(manifold, "signed_distance"):
                sd = np.asarray(jax.vmap(manifold.signed_distance)(jnp.asarray(paths[i])))
                j = int(np.argmax(np.abs(sd)))
                side = "inside" if sd[j] < 0 else "outside"
                text = f"off: {side} by {abs(sd[j]):.2f}"
                if hasattr(manifold, "major_radius"):
                    rho = np.hypot(paths[i][:, 0], paths[i][:, 1])
                    if rho.min() < manifold.major_radius - manifold.minor_radius - tol:
                        text += ", through the hole"
                words.append(text)
            else:
                words.append(f"off: max distance {ev['error_max'][i]:.2f}")
        out.append("; ".join(words) or "ok")
    return out


def summarise(status, ev: dict) -> dict[str, float]:
    """One table row: counts per status, ``on_manifold`` / ``success`` fractions (success:
    not stalled, not diverged, on the manifold), and the mean / max manifold error and
    displacement over the finite pairs (``n_finite`` of ``n``)."""
    status = np.asarray(status)
    fail = np.isin(status, ("stalled", "diverged")) | ~ev["on_manifold"]

    def mean(k):
        v = ev[k][np.isfinite(ev[k])]
        return float(v.mean()) if len(v) else float("nan")

    def vmax(k):
        v = ev[k][np.isfinite(ev[k])]
        return float(v.max()) if len(v) else float("nan")

    return {
        "n": int(len(status)),
        "n_finite": int(ev["finite"].sum()),
        "converged": int((status == "converged").sum()),
        "stalled": int((status == "stalled").sum()),
        "diverged": int((status == "diverged").sum()),
        "budget": int((status == "budget").sum()),
        "on_manifold": float(ev["on_manifold"].mean()),
        "success": float(1.0 - fail.mean()),
        "error_mean": mean("error_mean"),
        "error_max": vmax("error_max"),
        "displacement_mean": mean("displacement_mean"),
        "displacement_max": vmax("displacement_max"),
        "el_residual": float(np.nanmedian(ev["el_residual"])) if ev["finite"].any() else np.nan,
    }
