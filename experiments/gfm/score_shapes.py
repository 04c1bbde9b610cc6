"""Score your own interpolated shapes with the official set-level metrics.

    uv run experiments/gfm/score_shapes.py GEN_DIR REF_DIR [--step-filter 'step[3-6]']
        [--n-surface 16384] [--n-points 4096] [--json out.json]

GEN_DIR / REF_DIR hold meshes (.obj/.off/.ply) or point clouds (.ply/.npy); see
``geomopt.shapes.evaluate_folders``.
"""

import argparse
import json
import sys
from pathlib import Path

from geomopt.shapes import evaluate_folders

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("gen_dir", type=Path, help="folder of generated shapes")
    p.add_argument("ref_dir", type=Path, help="folder of reference shapes")
    p.add_argument("--step-filter", default=None, help="regex on file names, e.g. 'step[3-6]'")
    p.add_argument("--n-surface", type=int, default=16384, help="points sampled per mesh")
    p.add_argument("--n-points", type=int, default=4096, help="points after FPS")
    p.add_argument("--json", type=Path, default=None, help="also write the metrics here")
    a = p.parse_args()
    try:
        m = evaluate_folders(a.gen_dir, a.ref_dir, n_surface=a.n_surface, n_points=a.n_points,
                             step_filter=a.step_filter)  # fmt: skip
    except ValueError as e:
        print(f"score_shapes: {e}", file=sys.stderr)
        sys.exit(1)
    for k, v in m.items():
        if k != "nearest":
            print(f"{k:10s} {v:.4f}" if isinstance(v, float) else f"{k:10s} {v}")
    if a.json is not None:
        a.json.write_text(json.dumps(m, indent=1))
