"""GFM at latent scale: the matrix-free solvers against the official Adam.

One endpoint pair per size, the official shape-latent setting: 10 waypoints (``--n-points``),
sigma 0.3 (force = score of the denoiser at sigma), lambda 1, hypersphere-projected residual,
SLERP initialisation. Official Adam: lr 0.01, eps 1e-5, 500 iterations, no clipping, force
detached (:func:`geomopt.gfm.baselines.official_adam_path`). The matrix-free solvers
(:func:`geomopt.gfm.minimise_path_matrix_free`, ``fd_trace`` preconditioner,
tangent steps), each run to the EL residual Adam ends at (``sqrt(mean_i |r_i|^2)``):
``method="newton"`` (inexact Newton-GMRES, the default of :func:`geomopt.gfm.solve_matrix_free`),
and ``"lm"`` (Levenberg-Marquardt with our PCG on the normal equations); both also to 1/100 of
Adam's residual. (``lm_lineax``, LM with ``lineax.CG``, was removed: the same CG steps as our PCG,
and a breakdown at d = 16,384; see ``experiments/gfm/README_solver.md``.)

The denoiser (a cost model, not a trained model): ``D(x, sigma) = D_data(x, sigma) + c_out(sigma)
F(c_in(sigma) x, c_noise(sigma))`` where ``D_data`` is the exact denoiser of a Gaussian on a
``--rank``-dimensional linear "manifold" of latents (std ``--s-par`` along it, ``--s-perp`` off
it; :class:`LowRankGaussian`; the endpoints are two of its samples plus noise sigma N(0, I)), and
``F`` is the official EDM MLP (``EDMDenoiser``: input layer ``d -> width``, ``--blocks`` residual
SiLU blocks of ``width + 128 -> width``, output ``width -> d``) at random initialisation with the
output layer's weights of std ``--out-scale`` (a nonlinear force). With width 1024 and 4 blocks
one evaluation costs 12 / 26 / 77 MFLOP at d = 512 / 4096 / 16,384 (a real latent UNet costs far
more per evaluation, which scales both solvers alike). On an 8-component Gaussian mixture
(a memorising denoiser) at d = 4096 the force jumps between cells and the LM stalls; see
``benchmarks/results/gfm_latent.md``.

Timing: each solve is compiled first (not timed), then run ``--repeats`` times; the minimum
wall time is reported. Peak memory is XLA's ``memory_analysis()`` of each compiled solve
(arguments + outputs + temporaries - aliased). The network's weights are arguments of each.

    uv run benchmarks/bench_gfm_latent.py      # writes benchmarks/results/gfm_latent.{md,json}
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from functools import partial
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import tyro

from geomopt.diffusion import DenoiserConfig, EDMDenoiser, edm_preconditioning
from geomopt.gfm import gfm_residual, minimise_path_matrix_free, slerp
from geomopt.gfm.baselines import official_adam_path


@dataclasses.dataclass(frozen=True)
class Args:
    dims: tuple[int, ...] = (512, 4096, 16384)
    """Latent dimensions d (4096 = the 512 x 8 shape latent flattened, 16,384 = a 4 x 64 x 64
    image latent)."""
    n_points: tuple[int, ...] = (10,)
    """Waypoints including the endpoints (official: 10)."""
    width: int = 1024
    """Hidden width of the MLP in the denoiser."""
    blocks: int = 4
    """Residual blocks of the MLP."""
    out_scale: float = 0.05
    """Standard deviation of the MLP's output-layer weights (the official init is zero)."""
    rank: int = 16
    """Dimension k of the data's linear manifold."""
    s_par: float = 3.0
    """Data standard deviation along the manifold."""
    s_perp: float = 0.05
    """Data standard deviation off the manifold."""
    sigma: float = 0.3
    """Noise level of the endpoints and of the force."""
    adam_iters: int = 500
    """Official Adam iterations."""
    repeats: int = 3
    """Timed runs per solve (minimum reported)."""
    max_iters: int = 50
    """Newton + LM iteration cap."""
    cg_max_iters: int = 50
    """CG steps per LM iteration, cap."""
    gmres_max_iters: int = 20
    """GMRES steps per Newton iteration, cap (its basis is kept in memory)."""
    out: str = "benchmarks/results/gfm_latent"
    """Output stem (.md and .json are written)."""


class LowRankGaussian(eqx.Module):
    """Data ``N(mu, s_par^2 U U^T + s_perp^2 I)``, ``U`` (d x k) orthonormal: a k-dimensional
    linear "manifold" of latents. Its smoothed score is exact and linear, applied without a
    d x d matrix: ``-(I - U U^T)(x - mu)/a - U U^T (x - mu)/b``, ``a = s_perp^2 + sigma^2``,
    ``b = s_par^2 + sigma^2``."""

    mu: jax.Array
    basis: jax.Array
    s_par: float = eqx.field(static=True)
    s_perp: float = eqx.field(static=True)

    def denoise(self, x, sigma):
        y = x - self.mu
        par = self.basis @ (self.basis.T @ y)
        a, b = self.s_perp**2 + sigma**2, self.s_par**2 + sigma**2
        return x - sigma**2 * ((y - par) / a + par / b)


class BenchDenoiser(eqx.Module):
    data: LowRankGaussian
    net: EDMDenoiser

    def __call__(self, x, sigma):
        _, c_out, c_in, c_noise = edm_preconditioning(sigma, 1.0)
        return self.data.denoise(x, sigma) + c_out * self.net.network(c_in * x, c_noise)


class Score(eqx.Module):
    den: BenchDenoiser
    sigma: jax.Array

    def __call__(self, x):
        return (self.den(x, self.sigma) - x) / self.sigma**2


def make_problem(d, args, seed=0):
    k_mu, k_u, k_net, k_out, k_z, k0, k1 = jax.random.split(jax.random.key(seed), 7)
    basis, _ = jnp.linalg.qr(jax.random.normal(k_u, (d, args.rank)))
    data = LowRankGaussian(jax.random.normal(k_mu, (d,)), basis, args.s_par, args.s_perp)
    net = EDMDenoiser(d, DenoiserConfig(width=args.width, n_blocks=args.blocks), key=k_net)
    w = net.output_proj.weight
    net = eqx.tree_at(
        lambda n: n.output_proj.weight, net, args.out_scale * jax.random.normal(k_out, w.shape)
    )
    score = Score(BenchDenoiser(data, net), jnp.asarray(args.sigma, jnp.float32))
    z = args.s_par * jax.random.normal(k_z, (2, args.rank))
    x0 = data.mu + basis @ z[0] + args.sigma * jax.random.normal(k0, (d,))
    x1 = data.mu + basis @ z[1] + args.sigma * jax.random.normal(k1, (d,))
    return score, x0, x1


def flops_per_eval(d, args):
    w, e = args.width, 128
    return 2 * (2 * d * w + args.blocks * (w + e) * w)


def memory_bytes(compiled, temp_only=False):
    m = compiled.memory_analysis()
    if m is None:
        return float("nan")
    if temp_only:
        return m.temp_size_in_bytes
    return (
        m.argument_size_in_bytes
        + m.output_size_in_bytes
        + m.temp_size_in_bytes
        - m.alias_size_in_bytes
    )


def timed(fn, *a, repeats):
    best, out = np.inf, None  # fn is compiled ahead of time: no warm-up call needed
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*a))
        best = min(best, time.perf_counter() - t0)
    return best, out


SOLVERS = {"newton": "newton", "lm": "lm"}
"""Bench column prefix -> ``method`` of :func:`minimise_path_matrix_free`."""


def bench_one(d, k, args):
    score, x0, x1 = make_problem(d, args)
    lam = jnp.asarray(1.0, jnp.float32)

    def adam(x0, x1, score):
        return official_adam_path(
            slerp(x0, x1, k), score=score, lam=lam, lr=0.01, eps=1e-5, iters=args.adam_iters
        )

    def mf(x0, x1, score, tol, method):
        res = partial(gfm_residual, lam=lam, score=score, kind="hypersphere")
        return minimise_path_matrix_free(
            slerp(x0, x1, k),
            res,
            tol=tol,
            max_iters=args.max_iters,
            cg_max_iters=args.cg_max_iters,
            tangent=True,
            method=method,
            gmres_max_iters=args.gmres_max_iters,
        )

    params, static = eqx.partition(score, eqx.is_array)

    def with_params(fn, *static_args):
        return jax.jit(lambda x0, x1, p, *a: fn(x0, x1, eqx.combine(p, static), *a, *static_args))

    adam_c = with_params(adam).lower(x0, x1, params).compile()
    t_adam, (_, hist, res_adam) = timed(adam_c, x0, x1, params, repeats=args.repeats)
    target = float(res_adam)
    row = {
        "d": d,
        "n_points": k,
        "mflop_per_eval": flops_per_eval(d, args) / 1e6,
        "residual_init": float(np.asarray(hist)[0]),
        "adam_residual": target,
        "adam_s": t_adam,
        "adam_mem_mb": memory_bytes(adam_c) / 2**20,
        "adam_temp_mb": memory_bytes(adam_c, temp_only=True) / 2**20,
        "weights_mb": sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params)) / 2**20,
    }
    for name, method in SOLVERS.items():
        mf_c = with_params(mf, method).lower(x0, x1, params, jnp.float32(1.0)).compile()
        goals = {name: target, name + "100": target / 100}
        for key, tol in goals.items():
            t, (_, res, its, code, kry) = timed(
                mf_c, x0, x1, params, jnp.float32(tol), repeats=args.repeats
            )
            row |= {
                f"{key}_s": t,
                f"{key}_residual": float(res),
                f"{key}_iters": int(its),
                f"{key}_krylov": int(kry),
                f"{key}_code": int(code),
                f"{key}_speedup": t_adam / t,
            }
        row[f"{name}_mem_mb"] = memory_bytes(mf_c) / 2**20
        row[f"{name}_temp_mb"] = memory_bytes(mf_c, temp_only=True) / 2**20
    return row


def table(rows):
    head = (
        "| d | K | MFLOP/eval | start res. | Adam res. (500 it) | Adam s "
        "| Newton-GMRES s (it / GMRES) | speed-up | LM-PCG s (it / CG) | speed-up "
        "| Newton to res/100 s (it / GMRES, res.) "
        "| LM to res/100 s (it / CG, res.) | Adam MB (temp) | Newton MB (temp) | LM MB (temp) "
        "| weights MB |\n" + "|---" * 16 + "|\n"
    )

    def solve(r, key):
        out = f"{r[key + '_s']:.2f} ({r[key + '_iters']} / {r[key + '_krylov']}"
        if r[key + "_code"] != 0:  # did not reach the target: say where it stopped
            return out + f"; stopped, code {r[key + '_code']}, res. {r[key + '_residual']:.3g})"
        return out + ")"

    def speedup(r, key):
        return f"{r[key + '_speedup']:.1f}x" if r[key + "_code"] == 0 else "-"

    def tight(r, key):
        if r[key + "_code"] != 0:
            return solve(r, key)
        return f"{solve(r, key)[:-1]}, {r[key + '_residual']:.3g})"

    def mem(r, key):
        return f"{r[key + '_mem_mb']:.1f} ({r[key + '_temp_mb']:.1f})"

    lines = [
        f"| {r['d']} | {r['n_points']} | {r['mflop_per_eval']:.0f} | {r['residual_init']:.3g} "
        f"| {r['adam_residual']:.3g} | {r['adam_s']:.2f} "
        f"| {solve(r, 'newton')} | **{speedup(r, 'newton')}** "
        f"| {solve(r, 'lm')} | {speedup(r, 'lm')} "
        f"| {tight(r, 'newton100')} | {tight(r, 'lm100')} "
        f"| {mem(r, 'adam')} | {mem(r, 'newton')} | {mem(r, 'lm')} | {r['weights_mb']:.1f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main(args: Args):
    rows = []
    for d in args.dims:
        for k in args.n_points:
            r = bench_one(d, k, args)
            print(json.dumps(r), flush=True)
            rows.append(r)
    env = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "args": dataclasses.asdict(args),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    md = f"# GFM latent solver benchmark\n\n`{json.dumps(env)}`\n\n" + table(rows)
    out.with_suffix(".md").write_text(md)
    print(table(rows))


if __name__ == "__main__":
    main(tyro.cli(Args))
