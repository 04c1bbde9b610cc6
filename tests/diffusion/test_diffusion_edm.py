"""EDM denoiser: preconditioning, architecture, training, checkpoints, PF-ODE sampling."""

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomopt.diffusion._train as train_module
from geomopt.diffusion import (
    SCORE_PRESETS,
    DenoiserConfig,
    EDMDenoiser,
    SmoothedCircle,
    TrainConfig,
    edm_loss,
    edm_loss_weight,
    edm_preconditioning,
    edm_sigma_steps,
    load_denoiser,
    sample_pf_ode,
    save_denoiser,
    train_denoiser,
    train_for_manifold,
)
from geomopt.manifolds import get_manifold, mean_distance

TINY = DenoiserConfig(width=32, n_blocks=2, embed_dim=16)


def _perturbed(model, seed=0, scale=0.3):
    """The model with every weight redrawn, so the zero-initialised output layer is not zero."""
    rng = np.random.default_rng(seed)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    params = jax.tree.map(lambda x: jnp.asarray(scale * rng.normal(size=x.shape), x.dtype), params)
    return eqx.combine(params, static)


def test_preconditioning_formulas():
    sigma = jnp.array([0.002, 0.1, 1.0, 80.0])
    c_skip, c_out, c_in, c_noise = edm_preconditioning(sigma, 1.0)
    np.testing.assert_allclose(c_skip, 1 / (sigma**2 + 1), rtol=1e-6)
    np.testing.assert_allclose(c_out, sigma / jnp.sqrt(sigma**2 + 1), rtol=1e-6)
    np.testing.assert_allclose(c_in, 1 / jnp.sqrt(sigma**2 + 1), rtol=1e-6)
    np.testing.assert_allclose(c_noise, jnp.log(sigma) / 4, rtol=1e-6)
    np.testing.assert_allclose(edm_loss_weight(sigma), (sigma**2 + 1) / sigma**2, rtol=1e-6)
    # EDM's design: c_skip^2 sigma^2 ... the effective target has unit variance for data of std
    # sigma_data: c_out^2 + c_skip^2 sigma^2 ... equals sigma_data^2 c_skip (Karras et al. eq. 114)
    sd = 0.5
    c_skip, c_out, _, _ = edm_preconditioning(sigma, sd)
    np.testing.assert_allclose(c_out**2, sd**2 * (1 - c_skip), rtol=1e-2)


def test_architecture_and_identity_limits(key):
    official = eqx.filter_eval_shape(EDMDenoiser, 3, DenoiserConfig(), key=key)
    leaves = jax.tree_util.tree_leaves(official)
    n_params = sum(math.prod(x.shape) for x in leaves if isinstance(x, jax.ShapeDtypeStruct))
    # official SimpleMLP: Linear(3,128) + 4 x Linear(256,128) + Linear(128,3)
    assert n_params == (3 * 128 + 128) + 4 * (256 * 128 + 128) + (128 * 3 + 3)
    model = EDMDenoiser(2, TINY, key=key)
    x = jnp.array([0.3, -1.2])
    call = eqx.filter_jit(lambda m, s: (m(x, s), m.score(x, s)))
    # zero-initialised output layer: a fresh model is D = c_skip x
    np.testing.assert_allclose(call(model, jnp.array(0.7))[0], x / (0.7**2 + 1), rtol=1e-6)
    # sigma -> 0: c_skip -> 1 and c_out -> 0 linearly, so D -> identity for any weights
    noisy = _perturbed(model)
    err = [float(jnp.max(jnp.abs(call(noisy, jnp.array(s))[0] - x))) for s in (1e-4, 1e-6, 1.0)]
    assert err[1] < 1e-3 and err[1] < 0.05 * err[0], err
    assert err[2] > 1e-2
    # score = (D - x) / sigma^2
    d, score = call(noisy, jnp.array(0.5))
    np.testing.assert_allclose(score, (d - x) / 0.25, rtol=1e-5)


def test_bad_inputs(key, tmp_path):
    model = EDMDenoiser(2, TINY, key=key)
    with pytest.raises(ValueError, match=r"x of shape \(3,\), expected \(2,\)"):
        model(jnp.zeros(3), jnp.array(0.1))
    with pytest.raises(ValueError, match="sigma of shape"):
        model(jnp.zeros(2), jnp.ones(2))
    with pytest.raises(ValueError, match="width 0"):
        EDMDenoiser(2, DenoiserConfig(width=0), key=key)
    with pytest.raises(ValueError, match="data of shape"):
        train_denoiser(jnp.zeros(5), key=key)
    with pytest.raises(ValueError, match="steps 0"):
        train_denoiser(jnp.zeros((5, 2)), key=key, train_config=TrainConfig(steps=0))
    with pytest.raises(ValueError, match="non-finite"):
        train_denoiser(jnp.full((5, 2), jnp.nan), key=key)
    with pytest.raises(ValueError, match="unknown manifold 'klein'"):
        train_for_manifold("klein", "smoke", tmp_path)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        train_for_manifold("circle", "huge", tmp_path)
    with pytest.raises(FileNotFoundError, match="not a saved denoiser"):
        load_denoiser(tmp_path)
    with pytest.raises(ValueError, match="method 'euler'"):
        sample_pf_ode(model, key, 4, 2, method="euler")


def test_edm_sigma_steps():
    s = edm_sigma_steps(18, 0.002, 80.0, 7.0)
    assert s.shape == (18,)
    assert float(s[0]) == pytest.approx(80.0, rel=1e-5)
    assert float(s[-1]) == pytest.approx(0.002, rel=1e-4)
    assert bool(jnp.all(jnp.diff(s) < 0))
    # rho-spacing: sigma^(1/rho) is linear in the step index
    np.testing.assert_allclose(jnp.diff(s ** (1 / 7)), jnp.diff(s ** (1 / 7))[0], rtol=1e-3)


@pytest.mark.parametrize("method", ["heun", "tsit5"])
def test_pf_ode_with_exact_circle_denoiser_lands_on_circle(key, method):
    """With the exact denoiser of a smoothed circle the PF-ODE samples are on the circle and
    spread uniformly in angle."""
    pot = SmoothedCircle(data_noise=0.01)
    samples, info = sample_pf_ode(pot.denoise, key, 512, 2, method=method)
    assert info["success"]
    circle = get_manifold("circle")
    assert float(mean_distance(circle, samples)) < 0.03
    angles = jnp.arctan2(samples[:, 1], samples[:, 0])
    # uniform angle: the mean resultant length of 512 uniform angles is ~ 1/sqrt(512)
    assert float(jnp.abs(jnp.mean(jnp.exp(1j * angles)))) < 0.15
    if method == "heun":
        assert info["num_steps"] == 17  # 18 EDM noise levels, then the final denoising step


# One training / sampling shape for the tests below and the smoke preset, so they share compiles.
SMOKE = SCORE_PRESETS["smoke"][1]
N_SAMPLES = SMOKE.n_samples


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The smoke preset's denoiser for the circle, trained once for the tests below."""
    root = tmp_path_factory.mktemp("scores")
    model, summary = train_for_manifold("circle", SMOKE, root / "circle")
    return root, model, summary


def test_tiny_training_learns_the_circle(trained, key):
    root, model, summary = trained
    assert not summary["loaded"]
    circle = get_manifold("circle")
    data = circle.sample(key, SMOKE.n_data)
    # the EDM loss on a fixed large batch (same noise draws) drops below the fresh model's
    fresh = EDMDenoiser(2, SMOKE.model, key=key)  # zero output layer: D = c_skip x
    eval_loss = eqx.filter_jit(edm_loss)
    k_eval = jax.random.fold_in(key, 3)
    before, after = float(eval_loss(fresh, data, k_eval)), float(eval_loss(model, data, k_eval))
    assert after < 0.9 * before, (before, after)
    # PF-ODE samples of the trained model are much closer to the circle than the fresh one's
    untrained, _ = sample_pf_ode(fresh, key, N_SAMPLES, 2)
    d_untrained = float(mean_distance(circle, untrained))
    assert summary["sample_mean_distance"] < 0.3 * d_untrained, (summary, d_untrained)
    samples = np.load(root / "circle" / "samples.npy")
    assert float(mean_distance(circle, samples)) == pytest.approx(summary["sample_mean_distance"])
    # the learned score points towards the circle from outside and from inside
    xs = jnp.array([[1.3 * math.cos(0.4), 1.3 * math.sin(0.4)], [0.7, 0.0]])
    scores = eqx.filter_jit(lambda m, x: jax.vmap(m.score, in_axes=(0, None))(x, 0.1))(model, xs)
    radial = jnp.sum(scores * xs, -1)
    assert float(radial[0]) < 0 < float(radial[1])


def test_new_learning_rate_does_not_recompile(trained, key, monkeypatch):
    """The fixture compiled the smoke chunk; training again with another lr / P_mean reuses it."""
    traces = []
    real_loss = train_module.edm_loss

    def counting_loss(*args, **kwargs):
        traces.append(1)
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(train_module, "edm_loss", counting_loss)
    data = get_manifold("circle").sample(key, SMOKE.n_data)
    cfg = dataclasses.replace(SMOKE.train, lr=3e-4, p_mean=-1.0, steps=SMOKE.train.log_every)
    _, losses = train_denoiser(
        data, key=key, model_config=SMOKE.model, train_config=cfg, progress=False
    )
    assert losses.shape == (cfg.steps,) and np.all(np.isfinite(losses))
    assert traces == [], "a new learning rate / P_mean recompiled the training step"


def test_checkpoint_round_trip_and_cache(trained, tmp_path):
    root, model, _ = trained
    folder = root / "circle"
    for f in ("model.eqx", "model.json", "train_summary.json", "samples.npy"):
        assert (folder / f).exists(), f
    batch = eqx.filter_jit(lambda m, x: jax.vmap(m, in_axes=(0, None))(x, jnp.array(0.3)))
    xs = get_manifold("circle").sample(jax.random.key(5), 16, noise=0.2)
    # explicit save / load gives identical outputs
    save_denoiser(tmp_path / "m", model, SMOKE.model)
    np.testing.assert_array_equal(batch(model, xs), batch(load_denoiser(tmp_path / "m"), xs))
    # the same settings load the saved model instead of retraining
    again, summary = train_for_manifold("circle", SMOKE, folder)
    assert summary["loaded"]
    np.testing.assert_array_equal(batch(model, xs), batch(again, xs))
    # other settings do not silently replace it
    with pytest.raises(ValueError, match="other settings"):
        train_for_manifold("circle", dataclasses.replace(SMOKE, seed=1), folder)


def test_learning_rate_schedules():
    from geomopt.diffusion import learning_rates

    const = learning_rates(TrainConfig(steps=100, lr=2e-3))
    np.testing.assert_array_equal(const, np.full(100, 2e-3))
    cos = learning_rates(TrainConfig(steps=100, lr=2e-3, schedule="cosine"))
    assert cos[0] == pytest.approx(2e-3) and cos[50] == pytest.approx(1e-3)
    assert np.all(np.diff(cos) < 0) and 0 < cos[-1] < 1e-6
    with pytest.raises(ValueError, match="schedule 'linear'"):
        train_denoiser(jnp.zeros((5, 2)), key=jax.random.key(0),
                       train_config=TrainConfig(steps=2, schedule="linear"))  # fmt: skip


def test_cosine_schedule_reaches_the_step(key):
    """The scanned step takes each step's rate: a cosine run differs from a constant one."""
    data = get_manifold("circle").sample(key, 64)
    cfg = TrainConfig(steps=20, batch_size=16, lr=1e-2, log_every=10)
    m_const, _ = train_denoiser(data, key=key, model_config=SMOKE.model, train_config=cfg)
    m_cos, _ = train_denoiser(data, key=key, model_config=SMOKE.model,
                              train_config=dataclasses.replace(cfg, schedule="cosine"))  # fmt: skip
    leaves = lambda m: jax.tree.leaves(eqx.filter(m, eqx.is_inexact_array))  # noqa: E731
    assert any(not np.allclose(a, b) for a, b in zip(leaves(m_const), leaves(m_cos), strict=True))


def test_folders_trained_before_the_schedule_existed_still_load(trained):
    """A cache written without ``schedule`` in its config was trained at a constant rate."""
    import json

    root, _, _ = trained
    record = root / "circle" / "train_summary.json"
    saved = json.loads(record.read_text())
    saved["config"]["train"].pop("schedule")
    record.write_text(json.dumps(saved))
    _, summary = train_for_manifold("circle", SMOKE, root / "circle")
    assert summary["loaded"]
    with pytest.raises(ValueError, match="other settings"):
        train_for_manifold("circle", dataclasses.replace(
            SMOKE, train=dataclasses.replace(SMOKE.train, schedule="cosine")), root / "circle")
