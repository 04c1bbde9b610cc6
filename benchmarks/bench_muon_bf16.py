"""Newton-Schulz in bfloat16 on GPT-2 124M's matrix shapes: how far each form lands from the
float32 polynomial and from the exact polar factor (SVD), and its largest singular value.

The input of each shape is a matrix with a decaying spectrum (``s_i = exp(-i / 10) + 1e-3``,
random orthogonal factors; seeds 0..``seeds - 1``), the hard case for the Gram recursion: a
momentum matrix of a trained model has a few large directions and many small ones. Forms:
the plain iteration (``newton_schulz``), the Gram form (``gram_newton_schulz``) unrestarted and
restarted every 3 steps (``restart=3``; ``"auto"``'s choice in 16-bit compute), each in
bfloat16, against the same 5 quintic steps in float32 and against ``U V^T`` from the SVD. The
quintic does not converge to ``U V^T`` (its singular values land in about [0.7, 1.2] by
design), so the SVD column has a float32 floor, printed too. Writes
``benchmarks/results/muon_bf16.md``.

    uv run benchmarks/bench_muon_bf16.py            # the three GPT-2 shapes, 3 seeds
    uv run benchmarks/bench_muon_bf16.py --seeds 1 --shapes 128x512   # a quick look
"""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import tyro

from geomopt.optim import orthogonalize


@dataclasses.dataclass(frozen=True)
class Config:
    """bfloat16 Newton-Schulz error benchmark."""

    shapes: tuple[str, ...] = ("768x768", "768x2304", "768x3072")
    """Matrix shapes ``MxN`` (GPT-2 124M: attention projection, fused qkv, MLP)."""
    seeds: int = 3
    """Random matrices per shape (the table gives the range over them)."""
    out: Path = Path(__file__).parent / "results" / "muon_bf16.md"
    """Markdown result file ('' to skip writing)."""


FORMS = {
    "newton_schulz bf16": dict(method="newton_schulz", dtype=jnp.bfloat16),
    "gram bf16": dict(method="gram_newton_schulz", dtype=jnp.bfloat16),
    "gram bf16 restart 3": dict(method="gram_newton_schulz", dtype=jnp.bfloat16, restart=3),
    "newton_schulz f32": dict(method="newton_schulz"),
}


def decaying(m: int, n: int, seed: int) -> np.ndarray:
    """``U diag(exp(-i / 10) + 1e-3) V^T`` with random orthogonal ``U``, ``V``."""
    rng = np.random.default_rng(seed)
    k = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal((m, k)))
    v, _ = np.linalg.qr(rng.standard_normal((n, k)))
    return (u * (np.exp(-np.arange(k) / 10.0) + 1e-3)) @ v.T


def main(cfg: Config) -> None:
    if cfg.seeds < 1:
        raise SystemExit(f"--seeds {cfg.seeds}: expected >= 1")
    rows = []
    for shape in cfg.shapes:
        try:
            m, n = (int(x) for x in shape.split("x"))
        except ValueError:
            raise SystemExit(f"--shapes {shape!r}: expected MxN, e.g. 768x3072") from None
        stats: dict[str, list[tuple[float, float, float]]] = {f: [] for f in FORMS}
        for seed in range(cfg.seeds):
            g64 = decaying(m, n, seed)
            u, _, vt = np.linalg.svd(g64, full_matrices=False)
            polar = u @ vt
            g = jnp.asarray(g64, jnp.float32)
            ref = np.asarray(orthogonalize(g, method="newton_schulz"), np.float64)
            for form, kw in FORMS.items():
                out = np.asarray(jax.jit(lambda x, kw=kw: orthogonalize(x, **kw))(g)
                                 .astype(jnp.float32), np.float64)  # fmt: skip
                top = float(np.linalg.svd(out, compute_uv=False).max())
                stats[form].append(
                    (float(np.abs(out - ref).max()), float(np.abs(out - polar).max()), top)
                )
        for form, vals in stats.items():
            a = np.asarray(vals)
            rows.append((shape, form, a.min(0), a.max(0)))
            worst = a.max(0)
            print(f"{shape} {form}: max|X - NS_f32| {worst[0]:.4f}, max|X - UV^T| {worst[1]:.4f}, "
                  f"s_max {worst[2]:.3f}", flush=True)  # fmt: skip

    def span(lo, hi, fmt):
        return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}}-{hi:{fmt}}"

    lines = ["| shape | form | max abs diff from float32 NS | max abs diff from U V^T (SVD) "
             "| largest singular value |", "|---|---|---|---|---|"]  # fmt: skip
    for shape, form, lo, hi in rows:
        lines.append(f"| {shape} | {form} | {span(lo[0], hi[0], '.4f')} | "
                     f"{span(lo[1], hi[1], '.4f')} | {span(lo[2], hi[2], '.3f')} |")  # fmt: skip
    table = "\n".join(lines)
    print(table)
    if str(cfg.out) not in ("", "."):
        text = f"""# Newton-Schulz in bfloat16 on GPT-2's shapes

{__doc__.split(chr(10) + chr(10))[1]}

Ranges over {cfg.seeds} seed(s) per shape; 5 quintic steps, Frobenius preconditioning. jax
{jax.__version__}, CPU (bfloat16 matmuls emulated by XLA on the CPU: the rounding is
bfloat16's, the speed is not an accelerator's).

{table}

Command: `uv run benchmarks/bench_muon_bf16.py --seeds {cfg.seeds} --shapes {" ".join(cfg.shapes)}`
"""
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_text(text)
        print(f"wrote {cfg.out}")


if __name__ == "__main__":
    main(tyro.cli(Config))
