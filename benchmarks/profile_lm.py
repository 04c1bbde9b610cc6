"""Where a GPT-2 124M train step spends its time on the CPU: per-XLA-op profile of its parts.

    uv run benchmarks/profile_lm.py                  # 4 x 1024, 2 profiled calls per part
    uv run benchmarks/profile_lm.py --shape 2x128 --top 15

Each part of the step is jitted on its own and run under ``jax.profiler.trace``: one transformer
block forward + backward (random cotangent), the tied output head + chunked cross-entropy forward
+ backward, and the AdamW update of all 124M parameters. The trace's per-op durations (XLA:CPU
thunks) are summed per op and grouped: matmuls (``dot`` and the oneDNN/XNNPACK/YNNPACK dot
fusions), layout copies (``copy``/``transpose``/``pad``/``concatenate`` fusions), and the other
(elementwise / reduction) fusions. Per op the table shows the output shape and the JAX operation
it came from, so a slow copy can be traced back to the model code. Op durations are wall time on
a shared machine: read the shares, not the absolute numbers; ops that run concurrently (the
thunk executor overlaps independent ops) make the summed op time exceed the wall time. The
100 % of "ideal" is the dense FLOP count of the part at the float32 rate of a jitted
2048 x 2048 matmul measured in the same process just before.

``--ab ROUNDS`` adds an A/B of the whole train step (forward, chunked loss, backward, AdamW), the
linear layers through ``geomopt.lm._model.dense`` (its custom VJP) against plain ``jnp.dot``
under autodiff, interleaved in the same process: median step times and the median per-round
ratio.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import re
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import optax
from flax import nnx

# the A/B (--ab) swaps the module global ``dense`` that Linear looks up at trace time; the
# model module offers no public switch for it yet
import geomopt.lm._model as model_lib
from bench_lm import MODEL, measured_matmul_rate  # the same model and rate as bench_lm
from geomopt.lm import GPT2, Block, chunked_cross_entropy

_SKIP = ("$", "ThunkExecutor", "SlinkyThreadPool", "PjitFunction", "while")


def op_table(compiled_text: str) -> dict[str, tuple[str, str]]:
    """``op name -> (output shape, JAX op_name)`` from compiled HLO text."""
    table = {}
    for line in compiled_text.splitlines():
        m = re.match(r"\s*(?:ROOT )?%(\S+) = (\S+) \S+?\(", line)
        if m:
            src = re.search(r'op_name="([^"]*)"', line)
            table[m.group(1)] = (m.group(2), src.group(1) if src else "")
    return table


def category(name: str) -> str:
    if name.startswith(("dot", "ynn_fusion", "xnn_fusion", "onednn")):
        return "matmul"
    if any(s in name for s in ("copy", "transpose", "pad", "concatenate")):
        return "layout copy"
    return "other fusion"


def profile(fn, args, calls: int) -> tuple[float, collections.Counter]:
    """Median wall time of ``fn(*args)`` and summed per-op trace durations per call (s)."""
    jax.block_until_ready(fn(*args))
    ts = []
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d):
            for _ in range(calls):
                t = time.perf_counter()
                jax.block_until_ready(fn(*args))
                ts.append(time.perf_counter() - t)
        (path,) = glob.glob(f"{d}/**/*.trace.json.gz", recursive=True)
        events = json.load(gzip.open(path))["traceEvents"]
    per_op = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and not e["name"].startswith(_SKIP):
            per_op[e["name"]] += e["dur"] / 1e6 / calls
    return statistics.median(ts), per_op


def report(title, fn, args, flops, rate, calls, top):
    wall, per_op = profile(fn, args, calls)
    ops = op_table(fn.lower(*args).compile().as_text())
    total = sum(per_op.values())
    cats = collections.Counter()
    for k, v in per_op.items():
        cats[category(k)] += v
    print(f"\n## {title}: {wall:.3f} s per call (ideal {flops / rate:.3f} s at the matmul rate)")
    print(
        "by kind: "
        + ", ".join(f"{c} {v:.3f} s ({100 * v / total:.0f} %)" for c, v in cats.most_common())
    )
    print("| op | kind | s per call | share | output | from |\n|---|---|---:|---:|---|---|")
    for k, v in per_op.most_common(top):
        shape, src = ops.get(k, ("", ""))
        print(
            f"| {k} | {category(k)} | {v:.3f} | {100 * v / total:.0f} % | {shape} | {src[-60:]} |"
        )
    return {"wall": wall, **{c: v for c, v in cats.items()}}


def train_step(cfg, B, T):
    """A jitted 124M train step (loss, grads, AdamW) and its initial state, as in bench_lm."""
    graph, params = nnx.split(GPT2(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    tx = optax.adamw(1e-4, b1=0.9, b2=0.95, weight_decay=0.1)

    def step(p, o, toks):
        loss, g = jax.value_and_grad(lambda p: nnx.merge(graph, p).loss(toks)[0])(p)
        u, o = tx.update(g, o, p)
        return optax.apply_updates(p, u), o, loss

    toks = jax.random.randint(jax.random.key(5), (B, T + 1), 0, cfg.vocab_size)
    return jax.jit(step), (params, tx.init(params), toks)


def ab_dense(cfg, B, T, rounds: int) -> None:
    """Interleaved step times with ``dense`` (custom VJP) and with plain ``jnp.dot``."""
    variants, original = {}, model_lib.dense
    for name, fn in (("dense (custom VJP)", original), ("jnp.dot (autodiff)", jnp.dot)):
        model_lib.dense = fn  # Linear.__call__ looks the function up at trace time
        step, state = train_step(cfg, B, T)
        step = step.lower(*state).compile()
        jax.block_until_ready(step(*state))
        variants[name] = (step, state)
    model_lib.dense = original
    times = {k: [] for k in variants}
    for r in range(rounds):
        for name, (step, state) in variants.items():
            t = time.perf_counter()
            jax.block_until_ready(step(*state))
            times[name].append(time.perf_counter() - t)
        print(
            f"round {r + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
            flush=True,
        )
    (a, ta), (b, tb) = times.items()
    ratios = [y / x for x, y in zip(ta, tb, strict=True)]
    print(f"\n## A/B train step at {B} x {T}, {rounds} interleaved rounds")
    print(
        f"{a}: median {statistics.median(ta):.2f} s; {b}: median {statistics.median(tb):.2f} s; "
        f"{b} / {a} per round: {', '.join(f'{r:.2f}' for r in ratios)} "
        f"(median {statistics.median(ratios):.2f}x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4x1024", help="batch x sequence, e.g. 4x1024")
    ap.add_argument("--calls", type=int, default=2, help="profiled calls per part (>= 1)")
    ap.add_argument("--top", type=int, default=10, help="ops listed per part")
    ap.add_argument(
        "--ab",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also A/B the whole step: dense vs jnp.dot linear layers (0: skip)",
    )
    ap.add_argument("--only-ab", action="store_true", help="skip the per-op profile")
    args = ap.parse_args()
    try:
        B, T = (int(v) for v in args.shape.lower().split("x"))
    except ValueError:
        ap.error(f"--shape {args.shape!r}: expected BATCHxSEQ such as 4x1024")
    if B < 1 or not 1 <= T <= MODEL.context or args.calls < 1:
        ap.error(
            f"--shape {args.shape} / --calls {args.calls}: need B >= 1, 1 <= T <= "
            f"{MODEL.context}, calls >= 1"
        )
    cfg, D, V, N = MODEL, MODEL.d_model, MODEL.vocab_size, B * T
    if args.only_ab:
        ab_dense(cfg, B, T, max(args.ab, 1))
        return
    rate = measured_matmul_rate(repeats=5)
    print(
        f"# GPT-2 124M step parts at {B} x {T}, float32; jax {jax.__version__}, "
        f"{jax.devices()[0].platform}; matmul rate {rate / 1e9:.1f} GFLOP/s"
    )

    x = jax.random.normal(jax.random.key(1), (B, T, D))
    ct = jax.random.normal(jax.random.key(2), (B, T, D))
    graph, p = nnx.split(Block(cfg, rngs=nnx.Rngs(0)), nnx.Param)

    @jax.jit
    def block(p, x, ct):
        return jax.vjp(lambda p, x: nnx.merge(graph, p)(x)[0], p, x)[1](ct)

    attn = 12 * D * T * N * (0.5 + 0.5 * min(cfg.attn_block, T) / T if cfg.attn_block else 1)
    report(
        "block fwd+bwd", block, (p, x, ct), 6 * 12 * D * D * N + attn, rate, args.calls, args.top
    )

    w = 0.02 * jax.random.normal(jax.random.key(3), (V, D))
    tg = jax.random.randint(jax.random.key(4), (B, T), 0, V)

    @jax.jit
    def head(x, w):
        loss = lambda x, w: chunked_cross_entropy(x, w, tg, chunk=cfg.loss_chunk)[0]  # noqa: E731
        return jax.grad(loss, argnums=(0, 1))(x, w)

    report(
        f"head + chunked CE fwd+bwd (chunk {cfg.loss_chunk})",
        head,
        (x, w),
        6 * V * D * N,
        rate,
        args.calls,
        args.top,
    )

    _, params = nnx.split(GPT2(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    tx = optax.adamw(1e-4, b1=0.9, b2=0.95, weight_decay=0.1)
    opt = tx.init(params)
    grads = jax.tree.map(jnp.ones_like, params)

    @jax.jit
    def update(p, o, g):
        u, o = tx.update(g, o, p)
        return optax.apply_updates(p, u), o

    report("AdamW update (124M)", update, (params, opt, grads), 0.0, rate, args.calls, args.top)
    if args.ab:
        ab_dense(cfg, B, T, args.ab)


if __name__ == "__main__":
    main()
