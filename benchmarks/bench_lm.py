"""GPT-2 124M train step on this machine: geomopt (JAX) vs a nanoGPT-style PyTorch model.

    uv run --group hf benchmarks/bench_lm.py            # 2 x 128 and 4 x 1024
    uv run --group hf benchmarks/bench_lm.py --shapes 2x128 --rounds 5 --no-compile

PyTorch is in the opt-in dependency group ``hf`` (``--group hf``).

Both sides run the same step: forward, cross-entropy, backward and an AdamW update
(lr 1e-4, betas (0.9, 0.95), weight decay 0.1 on every parameter, float32 throughout) of GPT-2
124M as in the paper (12 layers, width 768, 12 heads, vocab 50304, no biases, tied
embeddings, exact GELU) on the same batch shape. geomopt: ``value_and_grad(GPT2.loss)``
(chunked output-head cross-entropy) + ``optax.adamw``, one jitted step with parameters and
optimiser state donated. PyTorch: the nanoGPT architecture (``F.scaled_dot_product_attention``,
``F.cross_entropy`` over the full logits) with ``torch.optim.AdamW`` (default foreach
implementation), eager and ``torch.compile`` (inductor, model only). Runs are interleaved (one
step of each per round, after warm-up/compilation) and the medians compared. MFU is
FLOPs/token (6N + 12 L D T) x tokens/s divided by the measured float32 rate of a jitted
2048 x 2048 matmul in this process, measured again in every round and taken as the median
("% of matmul rate"), so that a busy machine lowers both. The step time depends heavily on
what else runs on the machine: the load average is recorded with the results.
Results are printed and written to ``benchmarks/results/lm.md``.
"""

import argparse
import dataclasses
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from geomopt.lm import GPT2, flops_per_token, presets

MODEL = dataclasses.replace(presets["124M"], dtype="float32", activation="gelu_exact")


def measured_matmul_rate(n: int = 2048, repeats: int = 7) -> float:
    """FLOP/s of an ``n x n`` float32 jitted matmul, median over ``repeats`` calls."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(a).block_until_ready()
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times)


def jax_step_fn(cfg, batch, seq):
    graphdef, params = nnx.split(GPT2(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    tx = optax.adamw(1e-4, b1=0.9, b2=0.95, weight_decay=0.1)
    opt_state = tx.init(params)

    def loss_fn(p, toks):
        return nnx.merge(graphdef, p).loss(toks)[0]

    def step(p, o, toks):
        loss, grads = jax.value_and_grad(loss_fn)(p, toks)
        updates, o = tx.update(grads, o, p)
        return optax.apply_updates(p, updates), o, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    rng = np.random.default_rng(0)
    state = {"p": params, "o": opt_state}

    def run():
        toks = jnp.asarray(rng.integers(0, cfg.vocab_size, (batch, seq + 1)), jnp.int32)
        state["p"], state["o"], loss = step(state["p"], state["o"], toks)
        return float(loss)

    return run


def torch_step_fn(cfg, batch, seq, compile_model: bool):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.d_model
            self.ln_1 = nn.LayerNorm(d, bias=False)
            self.c_attn = nn.Linear(d, 3 * d, bias=False)
            self.c_proj = nn.Linear(d, d, bias=False)
            self.ln_2 = nn.LayerNorm(d, bias=False)
            self.c_fc = nn.Linear(d, 4 * d, bias=False)
            self.mlp_proj = nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            B, T, D = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
            q, k, v = (t.view(B, T, cfg.n_head, D // cfg.n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, D))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
            self.wpe = nn.Embedding(cfg.context, cfg.d_model)
            self.h = nn.ModuleList([Block() for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.d_model, bias=False)
            for p in self.parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    fwd = torch.compile(model) if compile_model else model
    gen = torch.Generator().manual_seed(0)

    def run():
        toks = torch.randint(0, cfg.vocab_size, (batch, seq + 1), generator=gen)
        loss = fwd(toks[:, :-1], toks[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)

    return run


def bench_shape(batch, seq, rounds, with_compile, peak):
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    fns = {"geomopt (JAX)": jax_step_fn(MODEL, batch, seq)}
    del peak  # replaced by the rate measured during the rounds
    fns["PyTorch eager"] = torch_step_fn(MODEL, batch, seq, compile_model=False)
    if with_compile:
        fns["PyTorch compile"] = torch_step_fn(MODEL, batch, seq, compile_model=True)
    warm = {}
    for name, fn in fns.items():  # compilation / first-call costs, excluded from the medians
        t = time.perf_counter()
        loss0 = fn()
        warm[name] = time.perf_counter() - t
        print(f"{batch}x{seq} {name}: first step {warm[name]:.1f} s (loss {loss0:.3f})", flush=True)
    times = {name: [] for name in fns}
    rates = []
    for r in range(rounds):
        rates.append(measured_matmul_rate(repeats=3))  # the machine's rate during this round
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
        print(
            f"{batch}x{seq} round {r + 1}/{rounds}: "
            + ", ".join(f"{n} {v[-1]:.2f} s" for n, v in times.items()),
            flush=True,
        )
    peak = statistics.median(rates)
    print(f"{batch}x{seq} matmul rate during the rounds: {peak / 1e9:.1f} GFLOP/s", flush=True)
    fpt = flops_per_token(MODEL, seq)
    out = []
    for name, ts in times.items():
        med = statistics.median(ts)
        out.append(
            dict(
                impl=name,
                batch=batch,
                seq=seq,
                step_s=med,
                spread=(min(ts), max(ts)),
                tokens_per_s=batch * seq / med,
                matmul_pct=100 * fpt * batch * seq / med / peak,
                first_s=warm[name],
                rate=peak,
            )
        )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="2x128,4x1024", help="batch x seq list")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "lm.md"))
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit(
            "bench_lm.py: PyTorch is not installed; it is in the opt-in group hf: "
            "uv run --group hf benchmarks/bench_lm.py"
        ) from None
    load0 = os.getloadavg()[0]
    peak = measured_matmul_rate()
    print(f"float32 matmul rate: {peak / 1e9:.1f} GFLOP/s; load average {load0:.1f}", flush=True)
    rows = []
    for shape in args.shapes.split(","):
        b, s = (int(x) for x in shape.split("x"))
        rows += bench_shape(b, s, args.rounds, not args.no_compile, peak)
    load1 = os.getloadavg()[0]
    lines = [
        "# GPT-2 124M train step: geomopt (JAX) vs nanoGPT-style PyTorch, CPU",
        "",
        f"{os.cpu_count()} CPU cores; float32 jitted 2048^2 matmul rate {peak / 1e9:.1f} GFLOP/s "
        "before the runs (the 100 % of the matmul column is the median rate measured during "
        f"the rounds of each shape); load average {load0:.1f} at the start, {load1:.1f} at "
        "the end (other jobs were running: absolute times are noisy, the interleaved ratios "
        f"less so). AdamW, float32; median of {args.rounds} interleaved rounds after warm-up. "
        f"`uv run benchmarks/bench_lm.py --shapes {args.shapes} --rounds {args.rounds}"
        f"{' --no-compile' if args.no_compile else ''}`.",
        "",
        "| batch x seq | implementation | step (s) | min-max (s) | tokens/s | % of matmul rate "
        "| vs geomopt | first step (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ours = next(
            x
            for x in rows
            if x["impl"] == "geomopt (JAX)" and x["batch"] == r["batch"] and x["seq"] == r["seq"]
        )
        lines.append(
            f"| {r['batch']} x {r['seq']} | {r['impl']} | {r['step_s']:.2f} | "
            f"{r['spread'][0]:.2f}-{r['spread'][1]:.2f} | {r['tokens_per_s']:,.0f} | "
            f"{r['matmul_pct']:.1f} % ({r['rate'] / 1e9:.1f} GFLOP/s) | "
            f"{r['step_s'] / ours['step_s']:.2f}x | {r['first_s']:.0f} |"
        )
    lines += [
        "",
        "`vs geomopt` = that implementation's step time / geomopt's (> 1: geomopt is faster).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
