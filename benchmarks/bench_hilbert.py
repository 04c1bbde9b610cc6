"""Hilbert encoding throughput (ns/point) of geomopt.canon.hilbert_index vs the usual tools.

Side by side in one run, on the CPU: ``geomopt`` (jitted, 10^6 points), ``numpy-hilbert-curve``
(``hilbert.encode``, vectorised NumPy; supports only d*bits <= 64), the pure-Python PyPI
``hilbertcurve`` (on a subsample, extrapolated per point) and ``hilbertsfc`` (needs Python >= 3.12;
reported as not installable on 3.11). Every tool's indices are checked against ours on the
subsample. Medians over repeats; results go to ``benchmarks/results/hilbert.md``.

    uv run benchmarks/bench_hilbert.py            # 3-D/16, 8-D/10 and 8-D/8 bits, 10^6 points
    uv run benchmarks/bench_hilbert.py --n 100000 # quicker
"""

import argparse
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from geomopt.canon import _curves, hilbert_index, words_to_int


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def bench_case(
    d: int, bits: int, n: int, n_python: int, n_numpy: int, repeats: int, unroll: bool
) -> dict:
    rng = np.random.default_rng(0)
    q = rng.integers(0, 2**bits, size=(n, d)).astype(np.uint32)
    q_dev = jax.device_put(jnp.asarray(q))
    encode = jax.jit(lambda x: hilbert_index(x, bits, unroll=unroll))
    t0 = time.perf_counter()
    compiled = encode.lower(q_dev).compile()
    compile_s = time.perf_counter() - t0
    ours = np.asarray(compiled(q_dev))
    ours_ns = median_time(lambda: compiled(q_dev).block_until_ready(), repeats) / n * 1e9
    row = {"d": d, "bits": bits, "n": n, "unroll": unroll, "compile_s": compile_s}
    row["geomopt_ns"] = ours_ns

    from hilbertcurve.hilbertcurve import HilbertCurve

    curve = HilbertCurve(bits, d)
    sub = q[:n_python]
    t0 = time.perf_counter()
    ref = [curve.distance_from_point(p) for p in sub.tolist()]
    row["hilbertcurve_ns"] = (time.perf_counter() - t0) / n_python * 1e9
    row["hilbertcurve_points"] = n_python
    row["agree_hilbertcurve"] = [int(v) for v in words_to_int(ours[:n_python])] == ref

    import hilbert

    if d * bits <= 64:
        sub = q[:n_numpy].astype(np.int64)
        out = hilbert.encode(sub, d, bits)
        row["numpy_hilbert_ns"] = (
            median_time(lambda: hilbert.encode(sub, d, bits), max(1, repeats // 2)) / n_numpy * 1e9
        )
        row["numpy_hilbert_points"] = n_numpy
        row["agree_numpy_hilbert"] = [int(v) for v in out[:n_python]] == ref
    else:
        try:
            hilbert.encode(q[:10].astype(np.int64), d, bits)
            row["numpy_hilbert_note"] = "unexpectedly accepted d*bits > 64"
        except Exception as err:  # its own error message fails to format (a TypeError)
            row["numpy_hilbert_note"] = f"refuses d*bits = {d * bits} > 64 ({type(err).__name__})"
    if importlib.util.find_spec("hilbertsfc") is None:
        row["hilbertsfc_note"] = (
            f"not installable here (needs Python >= 3.12; this is {platform.python_version()})"
        )
    return row


def mode_name(r: dict) -> str:
    if r["d"] <= _curves._TABLE_MAX_D:
        return "table"
    return "unrolled" if r["unroll"] else "loop"


def to_markdown(rows: list[dict], args) -> str:
    lines = [
        "# Hilbert encoding throughput (CPU)",
        "",
        f"Command: `uv run benchmarks/bench_hilbert.py --n {args.n}`. "
        f"JAX {jax.__version__}, Python {platform.python_version()}, "
        f"{jax.devices()[0].device_kind}, 2 cores shared with other jobs (load average "
        f"{args.load[0]:.1f} before, {os.getloadavg()[0]:.1f} after; timings are noisy, "
        "each row's tools run back to back so its ratios are like for like). Modes: table = "
        "state-machine lookups (d <= 4), loop = Skilling's level loop in lax.map chunks (d > 4).",
        "",
        "| d | bits | geomopt mode | geomopt (ns/pt) | numpy-hilbert-curve (ns/pt) "
        "| hilbertcurve (ns/pt) | speed-up vs numpy-hilbert-curve | vs hilbertcurve "
        "| compile (s) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        nh = r.get("numpy_hilbert_ns")
        nh_s = f"{nh:.0f}" if nh else r.get("numpy_hilbert_note", "-")
        ratio = f"{nh / r['geomopt_ns']:.0f}x" if nh else "n/a"
        lines.append(
            f"| {r['d']} | {r['bits']} | {mode_name(r)} | "
            f"{r['geomopt_ns']:.1f} | {nh_s} | "
            f"{r['hilbertcurve_ns']:.0f} | {ratio} | "
            f"{r['hilbertcurve_ns'] / r['geomopt_ns']:.0f}x | {r['compile_s']:.0f} |"
        )
    lines += [""]
    for r in rows:
        lines.append(
            f"- d={r['d']}, bits={r['bits']}: geomopt on {r['n']} points; hilbertcurve timed on "
            f"{r['hilbertcurve_points']} points and extrapolated per point (pure Python); "
            + (
                f"numpy-hilbert-curve on {r['numpy_hilbert_points']} points; "
                if "numpy_hilbert_ns" in r
                else f"numpy-hilbert-curve {r.get('numpy_hilbert_note')}; "
            )
            + f"indices agree with hilbertcurve: {r['agree_hilbertcurve']}"
            + (
                f", with numpy-hilbert-curve: {r['agree_numpy_hilbert']}"
                if "agree_numpy_hilbert" in r
                else ""
            )
            + f". hilbertsfc: {r.get('hilbertsfc_note', 'installed')}."
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="points for geomopt")
    p.add_argument("--n-numpy", type=int, default=100_000, help="points for numpy-hilbert-curve")
    p.add_argument("--n-python", type=int, default=2_000, help="points for hilbertcurve")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument(
        "--unroll-max-bits",
        type=int,
        default=0,
        help="also time unroll=True (d > 4 only) when d*bits is at most this (slow compile)",
    )
    p.add_argument("--cases", default="3:16,8:10,8:8", help="d:bits pairs")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "hilbert.md"))
    args = p.parse_args(argv)
    args.load = os.getloadavg()
    rows = []
    for case in args.cases.split(","):
        d, bits = map(int, case.split(":"))
        long = d > _curves._TABLE_MAX_D and d * bits <= args.unroll_max_bits
        for unroll in (False, True) if long else (False,):
            row = bench_case(
                d, bits, args.n, args.n_python, min(args.n_numpy, args.n), args.repeats, unroll
            )
            print(row, flush=True)
            rows.append(row)
    md = to_markdown(rows, args)
    print(md)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
