"""Compiled memory of the GPT-2 train step with the full-logits loss vs the chunked loss.

    uv run benchmarks/bench_lm_memory.py             # cpu-demo and 124M (batch 8 x 1024)
    uv run benchmarks/bench_lm_memory.py --only cpu-demo

The step is ``value_and_grad(model.loss)`` + AdamW (``optax.adamw``) + ``apply_updates``,
jitted with parameters and optimiser state donated, i.e. what the training loop runs minus
clipping, accumulation and the schedule. It is lowered and compiled from abstract shapes
(``jax.ShapeDtypeStruct``), so no parameter or batch memory is allocated, and XLA's
``memory_analysis()`` of the compiled step is read: ``temp`` is the scratch buffers of the
step (activations, logits, gradients), ``args`` the parameters, optimiser state and batch,
``peak`` = args + outputs - aliased + temp (what must be live at once, an upper bound of the
buffer assignment; the backend's own ``peak_memory_in_bytes`` is listed when it reports one).
Results are printed and written to ``benchmarks/results/lm_memory.md``.
"""

import argparse
import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from geomopt.lm import GPT2, presets


def step_memory(model_cfg, batch: int, seq: int) -> dict:
    abstract = nnx.eval_shape(lambda: GPT2(model_cfg, rngs=nnx.Rngs(0)))
    graphdef, params = nnx.split(abstract, nnx.Param)
    tx = optax.adamw(1e-4, weight_decay=0.1)
    opt_state = jax.eval_shape(tx.init, params)
    tokens = jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)

    def loss_fn(p, toks):
        return nnx.merge(graphdef, p).loss(toks)

    def train_step(p, o, toks):
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, toks)
        updates, o = tx.update(grads, o, p)
        return optax.apply_updates(p, updates), o, loss, acc

    t0 = time.perf_counter()
    compiled = jax.jit(train_step, donate_argnums=(0, 1)).lower(params, opt_state, tokens).compile()
    m = compiled.memory_analysis()
    peak = m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
    peak += m.temp_size_in_bytes
    return dict(
        temp=m.temp_size_in_bytes,
        args=m.argument_size_in_bytes,
        peak=peak,
        backend_peak=getattr(m, "peak_memory_in_bytes", 0) or 0,
        compile_s=time.perf_counter() - t0,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["cpu-demo", "124M"], default=None)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "lm_memory.md"))
    args = ap.parse_args()
    cases = [("cpu-demo", presets["cpu-demo"], 16, 256), ("124M", presets["124M"], 8, 1024)]
    if args.only:
        cases = [c for c in cases if c[0] == args.only]
    rows = []
    for name, cfg, batch, seq in cases:
        for chunk in (0, 1024, 256):
            c = dataclasses.replace(cfg, loss_chunk=chunk, dtype="float32")
            r = step_memory(c, batch, seq)
            r.update(model=name, batch=batch, seq=seq, chunk=chunk, vocab=cfg.vocab_size)
            print(r, flush=True)
            rows.append(r)

    def gib(x):
        return f"{x / 2**30:.2f}"

    dev = jax.devices()[0]
    lines = [
        "# GPT-2 train-step memory: full logits vs chunked cross-entropy",
        "",
        f"Backend: {dev.platform} ({dev.device_kind}); float32 compute and parameters; AdamW. "
        "`uv run benchmarks/bench_lm_memory.py` (compiled from abstract shapes; XLA "
        "`memory_analysis()`; GiB = 2^30 bytes).",
        "",
        "| model | vocab | batch x seq | loss_chunk | temp (GiB) | args (GiB) | peak (GiB) "
        "| backend peak (GiB) | compile (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        chunk = "full logits" if r["chunk"] == 0 else str(r["chunk"])
        bp = gib(r["backend_peak"]) if r["backend_peak"] else "-"
        lines.append(
            f"| {r['model']} | {r['vocab']} | {r['batch']} x {r['seq']} | {chunk} "
            f"| {gib(r['temp'])} | {gib(r['args'])} | {gib(r['peak'])} | {bp} "
            f"| {r['compile_s']:.0f} |"
        )
    for name in dict.fromkeys(r["model"] for r in rows):
        full = next(r for r in rows if r["model"] == name and r["chunk"] == 0)
        for r in rows:
            if r["model"] == name and r["chunk"]:
                lines.append(
                    f"\n{name}, chunk {r['chunk']}: peak {gib(full['peak'])} -> {gib(r['peak'])} "
                    f"GiB ({full['peak'] / r['peak']:.2f}x less), temp {gib(full['temp'])} -> "
                    f"{gib(r['temp'])} GiB."
                )
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
