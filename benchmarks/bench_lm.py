"""Train-step throughput (tokens/s) and MFU of GPT-2 configs on the available backend.

    uv run benchmarks/bench_lm.py            # tiny (fp32, bf16) and 124M (fp32) on this machine
    uv run benchmarks/bench_lm.py --skip-124m

Times the library's own training loop (``geomopt.lm.train``: jitted step, sharded batch, metric
fetch) and reports the median step time after compilation. MFU = FLOPs/token (6N + 12 L D T) x
tokens/s / peak. On accelerators the peak is the device's bf16 dense peak; on a CPU, which has
no published peak, it is the measured float32 throughput of a large jitted matmul on this
machine (so CPU "MFU" says how close the step gets to the machine's best matmul rate).
Results are printed and written to benchmarks/results/lm.md.
"""

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from geomopt.lm import DataConfig, OptimConfig, TrainConfig, peak_flops_per_device, presets, train


def measured_matmul_peak(n: int = 2048, repeats: int = 7) -> float:
    """FLOP/s of an ``n x n`` float32 matmul, median over ``repeats`` timed calls."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(a).block_until_ready()
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times)


def bench(label, model, *, batch, seq, steps, peak, root, offline_dir):
    cfg = TrainConfig(
        model=model,
        optim=OptimConfig(name="adamw", lr=1e-4, schedule="constant"),
        data=DataConfig(offline_dir=offline_dir, offline_bytes=2_000_000),
        seq_len=seq,
        batch_size=batch,
        steps=steps,
        eval_batches=0,
        eval_every=0,
        log_every=1,
        ckpt_every=0,
        peak_flops=peak,
        root=root,
        name=label,
        progress=False,
        overwrite=True,
    )
    t0 = time.perf_counter()
    s = train(cfg, log=lambda _: None)
    wall = time.perf_counter() - t0
    tps = batch * seq / s["median_step_time"]
    mfu = s["flops_per_token"] * tps / (peak * s["devices"])
    return dict(
        config=label,
        params=s["params"],
        batch=batch,
        seq=seq,
        step_s=s["median_step_time"],
        tokens_per_s=tps,
        mfu=mfu,
        wall_s=wall,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-124m", action="store_true", help="only the tiny configs")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "lm.md"))
    args = ap.parse_args()

    dev = jax.devices()[0]
    peak = peak_flops_per_device(dev)
    peak_note = "device bf16 dense peak"
    if peak != peak:  # NaN: CPU
        peak = measured_matmul_peak()
        peak_note = "measured 2048^2 float32 matmul rate on this machine"
    tmp = tempfile.mkdtemp(prefix="bench_lm_")
    common = dict(peak=peak, root=tmp, offline_dir=f"{tmp}/corpus")
    tiny = presets["demo-quick"]
    rows = [
        bench("demo-quick fp32", tiny, batch=16, seq=64, steps=12, **common),
        bench(
            "demo-quick bf16",
            dataclasses.replace(tiny, dtype="bfloat16"),
            batch=16,
            seq=64,
            steps=12,
            **common,
        ),
    ]
    if not args.skip_124m:
        on_cpu = dev.platform == "cpu"
        m124 = presets["124M"] if on_cpu else dataclasses.replace(presets["124M"], dtype="bfloat16")
        batch, seq, steps = (2, 128, 4) if on_cpu else (32, 1024, 20)
        rows.append(bench("124M", m124, batch=batch, seq=seq, steps=steps, **common))

    ratio = rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"]
    lines = [
        "# GPT-2 train-step throughput",
        "",
        f"Device: {dev.device_kind} ({dev.platform}), {jax.device_count()} device(s); "
        f"peak for MFU: {peak / 1e9:,.1f} GFLOP/s ({peak_note}).",
        "Optimiser AdamW; median step time after compilation; `uv run benchmarks/bench_lm.py`.",
        "",
        "| config | params | batch x seq | step (s) | tokens/s | MFU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['params']:,} | {r['batch']} x {r['seq']} | {r['step_s']:.4f} "
            f"| {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% |"
        )
    lines += ["", f"bf16 / fp32 tokens/s on demo-quick: {ratio:.2f}x", ""]
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
