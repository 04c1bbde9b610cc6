"""gfm/train_score on its smoke preset (folder layout, headline keys, figures) and its science."""

import json
import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.experiment import execute
from geomopt.gfm import exp_train_score
from geomopt.manifolds import get_manifold


def test_train_score_smoke_and_cache(gfm_out, run_smoke):
    exp = exp_train_score.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    for m in ("circle", "torus"):
        manifold = get_manifold(m)
        # the data: noise of std s off the manifold has mean distance s sqrt(2 / pi)
        floor = manifold.default_noise * np.sqrt(2.0 / np.pi)
        assert outcome.headline[f"{m}/data_mean_distance"] == pytest.approx(floor, rel=0.15)
        # 100 training steps already pull the PF-ODE samples towards the manifold: closer than
        # the samples of an untrained denoiser (zero output: N(0, I), sigma_data = 1)
        noise = jax.random.normal(jax.random.key(0), (20_000, manifold.ambient_dim))
        untrained = float(jnp.mean(jax.vmap(manifold.distance)(noise)))
        assert 0 < outcome.headline[f"{m}/sample_mean_distance"] < 0.85 * untrained, untrained
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
