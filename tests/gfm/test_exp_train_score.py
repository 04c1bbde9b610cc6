"""gfm/train_score on its smoke preset (folder layout, headline keys, figures) and its science."""

import json
import struct

from geomopt.experiment import execute
from geomopt.gfm import exp_train_score


def test_train_score_smoke_and_cache(gfm_out, run_smoke):
    exp = exp_train_score.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    for m in ("circle", "torus"):
        assert outcome.headline[f"{m}/sample_mean_distance"] > 0
    # one panel per manifold at a fixed panel size (the figure once grew quadratically wide)
    (figure,) = (gfm_out / "figures").rglob("gfm_score_samples_smoke.png")
    png = figure.read_bytes()
    width, height = struct.unpack(">II", png[16:24])
    assert width / height < 1.2 * len(exp.presets["smoke"].manifolds), (width, height)
    caches = list((gfm_out / "_cache" / "denoiser").iterdir())
    assert len(caches) == 2
    # a second run with the same spec loads the cached models instead of training
    again = execute(exp, exp.presets["smoke"], preset="smoke", out=gfm_out, name="again",
                    quiet=False)  # fmt: skip
    rows = [json.loads(line) for line in (again.path / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loaded"] for r in rows)
    assert again.headline == outcome.headline
