"""One accelerator check, prepared before a device appears: environment, the accelerator tests,
and the headline speeds with their goals, written to ``<out>/device_report.md`` + ``.json``.

Sections (each in its own try/except; the report is rewritten after every section, so a crash
or a kill loses only the section that was running; a total time budget, ``--budget`` seconds,
is checked between sections and parts of sections):

1. environment: Python, jax/jaxlib and library versions, devices and their memory;
2. rates: the measured bf16 matmul rate (``n x n``) and device copy bandwidth, next to the
   nominal dense bf16 peak of the device kind (``geomopt.lm.peak_flops_per_device``);
3. tests: ``pytest -m gpu`` on ``tests/lm/test_lm_gpu.py`` in a subprocess (bf16 vs float32
   GPT-2 forward/backward, the attention implementation actually compiled, sharding over the
   devices);
4. gpt2: GPT-2 124M, bf16 compute, AdamW, T = 1024, the largest batch that fits (from the
   compiled step's memory analysis), tokens/s and MFU against the nominal peak and against the
   measured bf16 matmul rate; the same step with cuDNN's fused attention
   (``jax.nn.dot_product_attention(implementation="cudnn")``) and an attention-only comparison
   (blocked / XLA / cuDNN, forward + backward);
5. sampling: KV-cache sampling tokens/s (``geomopt.lm.sample``) at batch 1 and 32;
6. muon: Newton-Schulz in bf16 on the 48 hidden matrices of GPT-2 124M (``geomopt.optim``) as a
   fraction of the measured bf16 matmul rate, and a whole update against ``optax.contrib.muon``;
7. hilbert: 3-D, 16-bit Hilbert encoding (``geomopt.canon.hilbert_index``) of 1e8 points,
   points/s and bytes/s against the measured copy bandwidth;
8. gfm: the matrix-free GFM solve (``geomopt.gfm.solve_matrix_free``) at d = 16384 for a batch
   of 64 pairs against the official Adam (500 iterations), to Adam's worst final residual.

Goals (pass/fail lines in the report; only meaningful on an accelerator, never claimed from a
dry run): GPT-2 >= 45 % MFU (nominal bf16 peak); Hilbert >= 50 % of the copy-bandwidth-bound
rate; Muon Newton-Schulz >= 60 % of the measured bf16 matmul rate.

On the device (its own python3 with JAX, flax, optax, equinox, ...; nothing from our lock):

    PYTHONPATH=src python3 benchmarks/device_check.py --out /tmp/device
    cp /tmp/device/device_report.md benchmarks/results/device_h200.md   # commit it (+ .json)

(``--budget 300`` when less device time is left; the sections run in the order above, the
report says which were skipped.)

The script imports neither tyro, trimesh, ott-jax, tensorboardX nor matplotlib (a run that
did fails). Only the ``tests`` section needs a package such images may lack, pytest; carry it
as wheels in ``benchmarks/.wheels`` (unpacked into a temporary folder at start, no pip
needed).
Git ignores that folder, so copy it along with the tree; prepare it here, with network, by

    uvx pip download --no-deps --only-binary=:all: -d benchmarks/.wheels \
        pytest pluggy iniconfig packaging pygments

Dry run (the same code paths at tiny sizes on the CPU, under 2 minutes; CI runs it):

    uv run python benchmarks/device_check.py --dry-run --out /tmp/device_dry
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

# grow device memory on demand: the tests section's pytest runs in a second process on the same
# device, which a first process holding 75 % of the memory up front would starve
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROOT = Path(__file__).resolve().parent.parent
WHEELS = Path(__file__).resolve().parent / ".wheels"

ABSENT_ON_DEVICE = ("tyro", "trimesh", "ott", "tensorboardX", "matplotlib")
"""Packages the device image lacks: no section may import them (the dry run fails if one did)."""

GOAL_MFU = 0.45
GOAL_HILBERT = 0.50
GOAL_MUON = 0.60


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Problem sizes of one mode (the real check or the dry run)."""

    matmul_n: int = 8192
    copy_mib: int = 1024
    gpt2_seq: int = 1024
    gpt2_batches: tuple[int, ...] = (8, 128)
    """(probe batch, cap): the probe batch is compiled first, its memory analysis sets the
    largest batch that fits (a multiple of the probe batch, at most the cap)."""
    gpt2_steps: int = 10
    attn_batch: int = 8
    sample_new: int = 256
    sample_batches: tuple[int, ...] = (1, 32)
    muon_layers: int = 12
    hilbert_points: int = 100_000_000
    gfm_d: int = 16384
    gfm_pairs: int = 64
    gfm_width: int = 1024
    gfm_adam_iters: int = 500
    repeats: int = 5
    inner: int = 10
    """Calls per timing of the short kernels (matmul, copy, Newton-Schulz, Hilbert, attention)."""


REAL = Sizes()
DRY = Sizes(
    matmul_n=256,
    copy_mib=8,
    gpt2_seq=64,
    gpt2_batches=(4, 4),
    gpt2_steps=2,
    attn_batch=2,
    sample_new=4,
    sample_batches=(1, 2),
    muon_layers=1,
    hilbert_points=100_000,
    gfm_d=64,
    gfm_pairs=2,
    gfm_width=32,
    gfm_adam_iters=20,
    repeats=2,
    inner=1,
)


# ---------------------------------------------------------------------------------------------
# Report


class Report:
    """Sections in order, goals, rewritten (atomically) to ``device_report.{md,json}``."""

    def __init__(self, out: Path, args):
        self.out = out
        self.data = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "dry_run": bool(args.dry_run),
            "budget_s": args.budget,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "sections": {},
            "goals": [],
        }

    def section(self, name: str, **fields) -> None:
        self.data["sections"].setdefault(name, {}).update(fields)
        self.write()

    def goal(self, name: str, value: float, target: float, note: str = "") -> None:
        ok = bool(math.isfinite(value) and value >= target)
        if self.data["dry_run"]:
            note = (note + "; " if note else "") + "dry run on the CPU: not a goal check"
        self.data["goals"].append(
            {"goal": name, "value": value, "target": target, "pass": ok, "note": note}
        )
        self.write()

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for name, text in (
            ("device_report.json", json.dumps(self.data, indent=1, default=str) + "\n"),
            ("device_report.md", markdown(self.data)),
        ):
            tmp = self.out / (name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, self.out / name)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)) and len(v) > 8:
        return json.dumps(list(v[:8]))[:-1] + ", ...]"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)
    return str(v)


def markdown(data: dict) -> str:
    kind = "DRY RUN (tiny sizes, CPU)" if data["dry_run"] else "accelerator check"
    lines = [
        f"# Device check: {kind}",
        "",
        f"Started {data['started']}; budget {data['budget_s']} s; command `{data['command']}`.",
        "",
        "## Goals",
        "",
    ]
    if data["goals"]:
        lines += ["| goal | value | target | result | note |", "|---|---|---|---|---|"]
        for g in data["goals"]:
            verdict = "PASS" if g["pass"] else "FAIL"
            lines.append(
                f"| {g['goal']} | {_fmt(g['value'])} | {_fmt(g['target'])} | {verdict} "
                f"| {g['note']} |"
            )
    else:
        lines.append("(none recorded yet)")
    for name, sec in data["sections"].items():
        lines += ["", f"## {name}: {sec.get('status', '?')}", ""]
        if "seconds" in sec:
            lines.append(f"{sec['seconds']:.1f} s.")
        for note in sec.get("notes", []):
            lines.append(f"- {note}")
        results = sec.get("results", {})
        if results:
            lines += ["", "| quantity | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in results.items()]
        if sec.get("error"):
            lines += ["", "```", sec["error"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Helpers


class Context:
    def __init__(self, args, sizes: Sizes, report: Report):
        self.args = args
        self.sizes = sizes
        self.report = report
        self.t0 = time.perf_counter()
        self.rates: dict[str, float] = {}
        self.site: Path | None = None
        self.work = Path(".")

    def left(self) -> float:
        return self.args.budget - (time.perf_counter() - self.t0)


def timed(fn, *args, repeats: int, warmup: int = 1, inner: int = 1):
    """Median wall seconds of one ``fn(*args)`` after ``warmup`` calls: each of ``repeats``
    timings dispatches ``inner`` calls back to back and waits for the last (so the dispatch
    latency of a sub-millisecond kernel is not counted ``inner`` times)."""
    import jax

    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times), out


def nominal_peak() -> tuple[float, str]:
    import jax

    from geomopt.lm import peak_flops_per_device

    dev = jax.devices()[0]
    peak = peak_flops_per_device(dev)
    kind = getattr(dev, "device_kind", dev.platform)
    if math.isfinite(peak):
        return peak, f"dense bf16 peak of {kind} (data sheet)"
    return math.nan, f"no known peak for {kind}"


def unpack_wheels(wheels: Path, work: Path) -> Path | None:
    """Unpack the pure-Python wheels of ``wheels`` into ``work/_site`` (a wheel is a zip of its
    package folders) and put it on ``sys.path``; ``None`` when there are none."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        return None
    site = work / "_site"
    site.mkdir(parents=True, exist_ok=True)
    for whl in found:
        with zipfile.ZipFile(whl) as z:
            z.extractall(site)
    sys.path.insert(0, str(site))
    return site


# ---------------------------------------------------------------------------------------------
# Sections


def environment(ctx: Context) -> dict:
    import importlib.metadata as md

    import jax

    versions = {}
    for pkg in ("jax", "jaxlib", "flax", "optax", "equinox", "lineax", "optimistix", "numpy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "absent"
    plugins = sorted(
        d.metadata["Name"]
        for d in md.distributions()
        if (d.metadata["Name"] or "").lower().startswith(("jax-cuda", "jax_cuda", "libtpu"))
    )
    devices = []
    for d in jax.devices():
        stats = {}
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001 - backends without memory stats
            pass
        devices.append(
            {
                "id": d.id,
                "platform": d.platform,
                "kind": getattr(d, "device_kind", "?"),
                "memory_limit_gib": stats.get("bytes_limit", float("nan")) / 2**30,
            }
        )
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "backend": jax.default_backend(),
        "versions": versions,
        "plugins": plugins,
        "devices": devices,
        "git_commit": commit or "unknown",
        "wheels_site": str(ctx.site) if ctx.site else "none",
    }


def rates(ctx: Context) -> dict:
    import jax
    import jax.numpy as jnp

    s = ctx.sizes
    n = s.matmul_n
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.bfloat16)
    mm = jax.jit(lambda x, y: x @ y)
    sec, _ = timed(mm, a, b, repeats=s.repeats, inner=s.inner)
    matmul = 2.0 * n**3 / sec
    words = s.copy_mib * 2**20 // 4
    x = jnp.arange(words, dtype=jnp.uint32)
    touch = jax.jit(lambda v: v ^ jnp.uint32(1))  # one read + one write of every byte
    sec_c, _ = timed(touch, x, repeats=s.repeats, inner=s.inner)
    copy_bw = 2.0 * x.nbytes / sec_c
    peak, source = nominal_peak()
    ctx.rates.update(matmul_bf16=matmul, copy_bytes_per_s=copy_bw, peak=peak)
    return {
        "matmul_n": n,
        "matmul_bf16_tflops": matmul / 1e12,
        "copy_gib": x.nbytes / 2**30,
        "copy_bandwidth_tb_s": copy_bw / 1e12,
        "nominal_peak_tflops": peak / 1e12,
        "nominal_peak_source": source,
        "matmul_fraction_of_peak": matmul / peak,
    }


def accelerator_tests(ctx: Context) -> dict:
    import importlib.util

    if importlib.util.find_spec("pytest") is None:
        return {
            "status_note": "pytest is not installed here: carry it as wheels (module docstring: "
            "uvx pip download ... -d benchmarks/.wheels pytest pluggy iniconfig packaging pygments)"
        }
    env = dict(os.environ)
    paths = [str(ROOT / "src")] + ([str(ctx.site)] if ctx.site else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if ctx.args.dry_run:
        env["GEOMOPT_GPU_TESTS_ON_CPU"] = "1"
    cmd = [
        sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"),
        "--rootdir", str(ROOT), "--confcutdir", str(ROOT / "tests" / "lm"),
        "-o", "addopts=", "-p", "no:cacheprovider", "-m", "gpu", "-q", "-rA",
        str(ROOT / "tests" / "lm" / "test_lm_gpu.py"),
    ]  # fmt: skip
    reserve = 30 if ctx.args.dry_run else 300  # for the sections after this one
    timeout = max(30.0, min(180.0, ctx.left() - reserve))
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
        )
        tail, code = (proc.stdout + proc.stderr).strip().splitlines(), proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        tail, code = out.strip().splitlines() + [f"timed out after {timeout:.0f} s"], -1
    lines = [ln for ln in tail if ln.startswith(("PASSED", "FAILED", "SKIPPED", "ERROR"))]
    if code != 0:
        raise RuntimeError(f"pytest exit code {code}:\n" + "\n".join(tail[-40:]))
    return {
        "command": " ".join(cmd[1:]),
        "exit_code": code,
        "outcomes": lines,
        "summary": tail[-1] if tail else "",
    }


def _gpt2_config(ctx: Context, attention: str = "blocked"):
    from geomopt.lm import GPT2Config, presets

    if ctx.args.dry_run:
        return GPT2Config(
            vocab_size=512, n_layer=2, n_head=2, d_model=64, context=64, attention=attention,
            dtype="bfloat16",
        )  # fmt: skip
    return dataclasses.replace(presets["124M"], dtype="bfloat16", attention=attention)


def _trainer(ctx: Context, model, batch: int):
    from geomopt.lm import DataConfig, OptimConfig, TrainConfig, Trainer

    cfg = TrainConfig(
        model=model,
        optim=OptimConfig(algorithm="adamw", lr=6e-4, weight_decay=0.1),
        data=DataConfig(offline_dir=str(ctx.work / "corpus"), offline_bytes=2_000_000),
        seq_len=ctx.sizes.gpt2_seq,
        batch_size=batch,
        steps=1000,
        eval_batches=0,
        n_devices=1,
        tensorboard=False,
    )
    return Trainer.build(cfg)


def _compiled_bytes(trainer, params, opt_state) -> tuple[float, float]:
    """(arguments + outputs - aliased, temporaries) bytes of the compiled train step."""
    import jax
    import jax.numpy as jnp

    from geomopt.lm import train_batch

    batch = train_batch(trainer.train_loader, 0, 1, trainer.mesh)
    lowered = trainer.step_fn.lower(
        params, opt_state, batch, jnp.int32(0), jnp.float32(1e-3), jax.random.key(0)
    )
    m = lowered.compile().memory_analysis()
    if m is None:
        return math.nan, math.nan
    fixed = m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
    return float(fixed), float(m.temp_size_in_bytes)


def _time_steps(trainer, steps: int) -> tuple[float, float]:
    """(seconds per step, last loss) of ``steps`` steps after one compiling step."""
    import jax

    params, opt_state = trainer.init()
    params, opt_state, m = trainer.step(params, opt_state, 0)
    jax.block_until_ready(m)
    t = time.perf_counter()
    for i in range(1, steps + 1):
        params, opt_state, m = trainer.step(params, opt_state, i)
    jax.block_until_ready((params, m))
    return (time.perf_counter() - t) / steps, float(m["loss"])


def _memory_limit() -> float:
    import jax

    try:
        return float((jax.devices()[0].memory_stats() or {}).get("bytes_limit", math.nan))
    except Exception:  # noqa: BLE001
        return math.nan


def gpt2(ctx: Context) -> dict:
    import jax

    from geomopt.lm import flops_per_token

    s = ctx.sizes
    probe, cap = s.gpt2_batches
    model = _gpt2_config(ctx)
    T = s.gpt2_seq
    fpt = flops_per_token(model, T)
    res: dict = {
        "seq_len": T,
        "flops_per_token": fpt,
        "probe_batch": probe,
        "attention": f"blocked (attn_block={model.attn_block}; GPT2Config.attention default)",
    }
    trainer = _trainer(ctx, model, probe)
    params, opt_state = trainer.init()
    fixed, temp = _compiled_bytes(trainer, params, opt_state)
    del params, opt_state
    limit = _memory_limit()
    res.update(probe_fixed_gib=fixed / 2**30, probe_temp_gib=temp / 2**30, limit_gib=limit / 2**30)
    batch = probe
    if math.isfinite(limit) and math.isfinite(temp) and temp > 0:
        per_seq = temp / probe
        fits = int((0.85 * limit - fixed) // per_seq)
        batch = max(probe, min(cap, fits // probe * probe))
    res["batch"] = batch
    while True:
        try:
            trainer = trainer if batch == probe else _trainer(ctx, model, batch)
            step_s, loss = _time_steps(trainer, s.gpt2_steps)
            break
        except Exception as e:  # noqa: BLE001 - out of memory: halve the batch
            if "RESOURCE_EXHAUSTED" not in str(e) or batch <= probe:
                raise
            batch = max(probe, batch // 2 // probe * probe)
            res["batch"] = batch
            res.setdefault("notes", []).append(f"out of memory; retried at batch {batch}")
    tps = batch * T / step_s
    peak, matmul = ctx.rates.get("peak", math.nan), ctx.rates.get("matmul_bf16", math.nan)
    res.update(
        step_s=step_s,
        loss_after=loss,
        tokens_per_s=tps,
        mfu_nominal_peak=fpt * tps / peak,
        mfu_measured_matmul=fpt * tps / matmul,
    )
    ctx.report.goal("GPT-2 124M bf16 MFU (nominal peak)", res["mfu_nominal_peak"], GOAL_MFU)
    ctx.report.section("gpt2", results=dict(res))  # kept if a later part crashes the process

    # the same step with cuDNN's fused attention (XLA's on a CPU dry run: cuDNN needs a GPU)
    fused = "cudnn" if jax.default_backend() == "gpu" else "xla"
    if ctx.left() > 120 or ctx.args.dry_run:
        try:
            tr = _trainer(ctx, _gpt2_config(ctx, fused), batch)
            fused_s, fused_loss = _time_steps(tr, s.gpt2_steps)
            res.update(
                {
                    f"{fused}_attention_step_s": fused_s,
                    f"{fused}_attention_tokens_per_s": batch * T / fused_s,
                    f"{fused}_attention_mfu_nominal_peak": fpt * batch * T / fused_s / peak,
                    f"{fused}_attention_loss_after": fused_loss,
                }
            )
            if fused == "cudnn":
                ctx.report.goal(
                    "GPT-2 124M bf16 MFU with cuDNN attention (nominal peak)",
                    res["cudnn_attention_mfu_nominal_peak"],
                    GOAL_MFU,
                    note="--model.attention cudnn; the default is blocked",
                )
        except Exception as e:  # noqa: BLE001
            res[f"{fused}_attention_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        ctx.report.section("gpt2", results=dict(res))
    res.update(attention_only(ctx, model))
    return res


def attention_only(ctx: Context, model) -> dict:
    """Forward + backward of one attention layer at the model's shapes: blocked (ours), XLA's
    ``dot_product_attention`` and cuDNN's (GPU only)."""
    import jax
    import jax.numpy as jnp

    from geomopt.lm import causal_attention

    B, T, N, H = ctx.sizes.attn_batch, ctx.sizes.gpt2_seq, model.n_head, model.head_dim
    q, k, v = jax.random.normal(jax.random.key(2), (3, B, T, N, H), jnp.bfloat16)
    impls = {"blocked": (model.attn_block, None), "xla": (0, "xla")}
    if jax.default_backend() == "gpu":
        impls["cudnn"] = (0, "cudnn")
    out, ref = {}, None
    for name, (block, impl) in impls.items():

        def loss(q, k, v, block=block, impl=impl):
            y = causal_attention(q, k, v, block, impl)
            return jnp.sum(y.astype(jnp.float32) ** 2)

        fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
        try:
            sec, (val, _) = timed(fn, q, k, v, repeats=ctx.sizes.repeats, inner=ctx.sizes.inner)
        except Exception as e:  # noqa: BLE001
            out[f"attention_{name}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        ref = float(val) if ref is None else ref
        out[f"attention_{name}_fwd_bwd_ms"] = 1e3 * sec
        out[f"attention_{name}_rel_diff"] = abs(float(val) - ref) / abs(ref)
    return out


def sampling(ctx: Context) -> dict:
    import jax
    from flax import nnx

    from geomopt.lm import GPT2, sample

    model = GPT2(_gpt2_config(ctx), rngs=nnx.Rngs(0))
    new = ctx.sizes.sample_new
    res = {"max_new_tokens": new, "prompt_tokens": 16}
    for b in ctx.sizes.sample_batches:
        prompts = [[(7 * i + j) % 256 for j in range(16)] for i in range(b)]

        def run(prompts=prompts):
            return sample(
                model, prompts, max_new_tokens=new, temperature=1.0, top_k=50,
                key=jax.random.key(0),
            )  # fmt: skip

        run()  # compiles
        t = time.perf_counter()
        run()
        sec = time.perf_counter() - t
        res[f"batch_{b}_tokens_per_s"] = b * new / sec
        res[f"batch_{b}_ms_per_token_step"] = 1e3 * sec / new
    return res


def _ns_flops(m: int, n: int, steps: int = 5) -> float:
    m, n = min(m, n), max(m, n)
    return steps * (4 * m * m * n + 2 * m**3)


def muon(ctx: Context) -> dict:
    import jax
    import jax.numpy as jnp
    import optax

    from geomopt.optim import muon as geomopt_muon
    from geomopt.optim import orthogonalize_grouped

    d = 768 if not ctx.args.dry_run else 64
    shapes = {"qkv": (d, 3 * d), "attn_proj": (d, d), "fc": (d, 4 * d), "mlp_proj": (4 * d, d)}
    key = jax.random.key(0)
    params, i = {}, 0
    for layer in range(ctx.sizes.muon_layers):
        for name, shape in shapes.items():
            params[f"h{layer}.{name}"] = 0.02 * jax.random.normal(jax.random.fold_in(key, i), shape)
            i += 1
    grads = jax.tree.map(lambda p: jnp.cos(50.0 * p), params)
    flops = sum(_ns_flops(*x.shape) for x in params.values())
    ns = jax.jit(lambda g: orthogonalize_grouped(g, method="newton_schulz", dtype=jnp.bfloat16))
    sec, _ = timed(ns, grads, repeats=ctx.sizes.repeats, inner=ctx.sizes.inner)
    matmul = ctx.rates.get("matmul_bf16", math.nan)
    res = {
        "matrices": len(params),
        "ns_flops": flops,
        "ns_bf16_ms": 1e3 * sec,
        "ns_tflops": flops / sec / 1e12,
        "ns_fraction_of_measured_matmul": flops / sec / matmul,
    }
    ctx.report.goal(
        "Muon Newton-Schulz bf16 (fraction of measured bf16 matmul)",
        res["ns_fraction_of_measured_matmul"],
        GOAL_MUON,
    )
    impls = {
        "optax.contrib.muon": optax.contrib.muon(0.02),
        "geomopt muon bf16": geomopt_muon(0.02, compute_dtype=jnp.bfloat16),
    }
    for name, opt in impls.items():
        state = opt.init(params)
        fn = jax.jit(opt.update)
        sec, _ = timed(fn, grads, state, params, repeats=ctx.sizes.repeats, inner=ctx.sizes.inner)
        res[f"{name} update ms"] = 1e3 * sec
    res["optax / geomopt"] = (
        res["optax.contrib.muon update ms"] / res["geomopt muon bf16 update ms"]
    )
    return res


def hilbert(ctx: Context) -> dict:
    import jax
    import jax.numpy as jnp

    from geomopt.canon import hilbert_index

    n, bits = ctx.sizes.hilbert_points, 16
    q = jax.random.randint(jax.random.key(0), (n, 3), 0, 2**bits, jnp.int32).astype(jnp.uint16)
    enc = jax.jit(hilbert_index, static_argnums=1)
    sec, h = timed(enc, q, bits, repeats=ctx.sizes.repeats, inner=ctx.sizes.inner)
    bytes_per_point = (q.nbytes + h.nbytes) / n
    bw = ctx.rates.get("copy_bytes_per_s", math.nan)
    res = {
        "points": n,
        "input_dtype": str(q.dtype),
        "output": f"{h.shape[1:]} {h.dtype}",
        "bytes_per_point": bytes_per_point,
        "points_per_s": n / sec,
        "bytes_per_s": n * bytes_per_point / sec,
        "bandwidth_bound_points_per_s": bw / bytes_per_point,
        "fraction_of_bandwidth_bound": n * bytes_per_point / sec / bw,
    }
    ctx.report.goal(
        "Hilbert 3-D 16-bit (fraction of copy-bandwidth-bound rate)",
        res["fraction_of_bandwidth_bound"],
        GOAL_HILBERT,
    )
    return res


def gfm(ctx: Context) -> dict:
    """The latent GFM cost model of ``benchmarks/bench_gfm_latent.py`` (a low-rank Gaussian's
    exact denoiser plus a random EDM MLP of width ``gfm_width``), a batch of pairs."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from geomopt.diffusion import DenoiserConfig, EDMDenoiser, edm_preconditioning
    from geomopt.gfm import slerp, solve_matrix_free
    from geomopt.gfm.baselines import official_adam_path

    s = ctx.sizes
    d, B, K, rank, sigma = s.gfm_d, s.gfm_pairs, 10, 16, 0.3
    ks = jax.random.split(jax.random.key(0), 7)
    basis, _ = jnp.linalg.qr(jax.random.normal(ks[0], (d, rank)))
    mu = jax.random.normal(ks[1], (d,))
    net = EDMDenoiser(d, DenoiserConfig(width=s.gfm_width, n_blocks=4), key=ks[2])
    w = net.output_proj.weight
    net = eqx.tree_at(lambda n: n.output_proj.weight, net, 0.05 * jax.random.normal(ks[3], w.shape))

    class Score(eqx.Module):
        net: EDMDenoiser
        basis: jax.Array
        mu: jax.Array
        sigma: jax.Array

        def __call__(self, x):
            y = x - self.mu
            par = self.basis @ (self.basis.T @ y)
            a, b = 0.05**2 + self.sigma**2, 3.0**2 + self.sigma**2
            data = x - self.sigma**2 * ((y - par) / a + par / b)
            _, c_out, c_in, c_noise = edm_preconditioning(self.sigma, 1.0)
            den = data + c_out * self.net.network(c_in * x, c_noise)
            return (den - x) / self.sigma**2

    score = Score(net, basis, mu, jnp.asarray(sigma, jnp.float32))
    z = 3.0 * jax.random.normal(ks[4], (2, B, rank))
    x0 = mu + z[0] @ basis.T + sigma * jax.random.normal(ks[5], (B, d))
    x1 = mu + z[1] @ basis.T + sigma * jax.random.normal(ks[6], (B, d))
    one = jnp.float32(1.0)

    @jax.jit
    def adam(x0, x1, score):
        def pair(a, b):
            path0 = slerp(a, b, K)
            return official_adam_path(
                path0, score=score, lam=one, lr=0.01, eps=1e-5, iters=s.gfm_adam_iters
            )[2]

        return jax.vmap(pair)(x0, x1)

    t_adam, res_adam = timed(adam, x0, x1, score, repeats=1)
    target = float(jnp.max(res_adam))

    def ours():
        return solve_matrix_free(x0, x1, score=score, n_points=K, tol=target)

    t_ours, (_, rep) = timed(ours, repeats=1)
    res = {
        "d": d,
        "pairs": B,
        "waypoints": K,
        "adam_iterations": s.gfm_adam_iters,
        "adam_s": t_adam,
        "adam_worst_residual": target,
        "matrix_free_s": t_ours,
        "speedup_adam_over_ours": t_adam / t_ours,
    }
    res["matrix_free_worst_residual"] = float(jnp.max(jnp.asarray(rep.residual)))
    res["matrix_free_converged"] = float(jnp.mean(jnp.asarray(rep.converged)))
    res["matrix_free_max_iterations"] = int(jnp.max(jnp.asarray(rep.iterations)))
    res["matrix_free_krylov_steps_max"] = int(jnp.max(jnp.asarray(rep.cg_iterations)))
    return res


SECTIONS = (
    ("environment", environment, 0),
    ("rates", rates, 10),
    ("tests", accelerator_tests, 40),
    ("gpt2", gpt2, 90),
    ("sampling", sampling, 40),
    ("muon", muon, 30),
    ("hilbert", hilbert, 20),
    ("gfm", gfm, 40),
)
"""(name, function, seconds it needs at least on the device; skipped when less is left)."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the report")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes, any backend")
    parser.add_argument("--budget", type=float, default=0.0, help="seconds (default 480; dry 170)")
    parser.add_argument("--only", nargs="*", default=(), help="run only these sections")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="folder of extra wheels")
    args = parser.parse_args(argv)
    args.budget = args.budget or (170.0 if args.dry_run else 480.0)
    args.out = args.out.resolve()
    sys.path.insert(0, str(ROOT / "src"))
    report = Report(args.out, args)
    ctx = Context(args, DRY if args.dry_run else REAL, report)
    ctx.work = Path(tempfile.mkdtemp(prefix="device_check_"))  # wheels, corpus: not the report
    ctx.site = unpack_wheels(args.wheels, ctx.work)
    failed = 0
    for name, fn, needs in SECTIONS:
        if args.only and name not in args.only:
            continue
        if name != "environment" and ctx.left() < (5 if args.dry_run else needs):
            report.section(name, status="skipped", notes=[f"time budget: {ctx.left():.0f} s left"])
            continue
        report.section(name, status="running")
        t = time.perf_counter()
        try:
            results = fn(ctx)
            notes = results.pop("notes", []) if isinstance(results, dict) else []
            report.section(
                name, status="ok", seconds=time.perf_counter() - t, results=results, notes=notes
            )
        except Exception as e:  # noqa: BLE001 - one failure must not lose the other sections
            failed += 1
            report.section(
                name,
                status="error",
                seconds=time.perf_counter() - t,
                error=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}",
            )
        status = report.data["sections"][name]["status"]
        took = time.perf_counter() - t
        print(
            f"[device_check] {name}: {status} ({took:.1f} s, {ctx.left():.0f} s left)", flush=True
        )
    leaked = sorted(m for m in ABSENT_ON_DEVICE if sys.modules.get(m) is not None)
    report.section(
        "done",
        status="ok" if not leaked else "error",
        results={"total_s": time.perf_counter() - ctx.t0, "imported_absent_on_device": leaked},
    )
    if leaked:
        print(f"[device_check] imported {leaked}, which the device image lacks", flush=True)
        failed += 1
    shutil.rmtree(ctx.work, ignore_errors=True)
    print(f"[device_check] wrote {args.out / 'device_report.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
