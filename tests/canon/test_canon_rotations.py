"""Rotation canonizations: SO(d) samples, invariances of the canonical forms and models, the
covering proxy, and ``canon/rotations`` on its smoke preset."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.canon import exp_rotations
from geomopt.canon._model_config import ModelConfig
from geomopt.canon._rotations import (
    RotationClassifier,
    pca_frame,
    random_rotations,
    rotation_covering_proxy,
    sign_flips,
    skew_frame,
)
from geomopt.experiment import execute, plot_run


def _cloud(p=20, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((p, d)) * np.array([3.0, 2.0, 1.0][:d]) + rng.random(d) ** 3
    ).astype(np.float32)


@pytest.mark.parametrize("d", [2, 3, 4])
def test_random_rotations_are_in_so_d(d):
    r = random_rotations(16, d, seed=0)
    np.testing.assert_allclose(r @ r.transpose(0, 2, 1), np.broadcast_to(np.eye(d), r.shape),
                               atol=1e-5)  # fmt: skip
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-5)


def test_skew_frame_is_rotation_and_permutation_invariant():
    x = _cloud(d=3)
    for r in random_rotations(5, 3, seed=1):
        y = (x @ r)[np.random.default_rng(2).permutation(len(x))]
        np.testing.assert_allclose(skew_frame(jnp.asarray(y)), skew_frame(jnp.asarray(x)),
                                   atol=2e-4)  # fmt: skip


def test_pca_frame_is_only_fixed_up_to_sign_flips():
    x = _cloud(d=3)
    a = np.asarray(pca_frame(jnp.asarray(x)))
    for r in random_rotations(5, 3, seed=3):
        b = np.asarray(pca_frame(jnp.asarray(x @ r)))
        s = np.sign((a * b).sum(0))  # the per-axis sign relating them
        assert set(np.abs(s).tolist()) == {1.0}
        np.testing.assert_allclose(b * s, a, atol=2e-4)
    assert sign_flips(3).shape == (8, 3) and (sign_flips(3)[0] == 1).all()


def test_frame_averaged_model_is_rotation_invariant(key):
    x = _cloud(d=3)
    cfg = ModelConfig()
    fa = RotationClassifier(len(x), 3, 4, cfg, canon="frame_avg", key=key)
    sk = RotationClassifier(len(x), 3, 4, cfg, canon="skew", key=key)
    for r in random_rotations(3, 3, seed=4):
        np.testing.assert_allclose(fa(jnp.asarray(x @ r)), fa(jnp.asarray(x)), atol=1e-4)
        np.testing.assert_allclose(sk(jnp.asarray(x @ r)), sk(jnp.asarray(x)), atol=1e-4)
    np.testing.assert_allclose(np.exp(np.asarray(fa(jnp.asarray(x)))).sum(), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="rotation canonization"):
        RotationClassifier(len(x), 3, 4, cfg, canon="svd", key=key)


def test_rotation_covering_proxy():
    rng = np.random.default_rng(0)
    train = np.stack([_cloud(d=3, seed=s) for s in range(4)])
    y = np.array([0, 0, 1, 1])
    rot = random_rotations(4, 3, seed=5)
    test = np.einsum("npd,nde->npe", train, rot)[:, rng.permutation(20)]
    none = rotation_covering_proxy(test, y, train, y, "none")
    skew = rotation_covering_proxy(test, y, train, y, "skew")
    fa = rotation_covering_proxy(test, y, train, y, "frame_avg")
    pca = rotation_covering_proxy(test, y, train, y, "pca")
    assert skew < 1e-3 and fa < 1e-3 < none  # rotated copies: invariant forms coincide
    assert fa <= pca + 1e-9


@pytest.mark.slow  # ~40 s of CPU: three architectures compile (CI runs it via reproduce smoke)
def test_smoke_run(tmp_path):
    exp = exp_rotations.EXPERIMENT
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    for c in exp_rotations.CANONS:
        assert {f"acc/{c}/d3", f"gap/{c}/d3", f"cover/{c}/d3"} <= set(out.headline)
    assert [k for k, v in out.headline.items() if not math.isfinite(v)] == []
    assert 3 <= len(exp.key_numbers) <= 6 and set(exp.paper) <= set(exp.key_numbers)
    assert set(exp.key_numbers) <= set(out.headline)
    assert [f.name for f in plot_run(exp, out.path, tmp_path / "f")] == ["rotations_smoke.png"]
