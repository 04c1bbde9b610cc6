"""msign by SVD and Newton-Schulz: exact polar factor, singular-value bands of the coefficient
presets, batching, Gram form, compute dtype, optax oracle, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from optax.contrib import _muon as optax_muon

from geomopt.optim import orthogonalize
from geomopt.optim._orthogonalize import POLAR_EXPRESS, QUINTIC, ns_coefficients

_ortho = jax.jit(
    orthogonalize, static_argnames=("method", "steps", "coeffs", "dtype", "eps", "restart")
)


def _well_conditioned(key, m, n, cond=10.0, batch=()):
    """A float32 (batch..., m, n) stack with singular values spread over [3/cond, 3] (built with
    NumPy: a jitted QR costs seconds of compile time on the CPU)."""
    seed = int(jax.random.randint(key, (), 0, 2**30))
    rng = np.random.default_rng(seed)
    r = min(m, n)
    u = np.linalg.qr(rng.standard_normal(batch + (m, r)))[0]
    v = np.linalg.qr(rng.standard_normal(batch + (n, r)))[0]
    s = 3.0 * np.geomspace(1.0, 1.0 / cond, r)
    return jnp.asarray((u * s) @ np.swapaxes(v, -1, -2), jnp.float32)


def _svals(x):
    return np.linalg.svd(np.asarray(x, np.float64), compute_uv=False)


def test_svd_is_the_exact_polar_factor(key):
    with jax.enable_x64(True):
        g = jax.random.normal(key, (7, 4), dtype=jnp.float64)
        q = orthogonalize(g, method="svd")
        assert q.dtype == jnp.float64
        np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-12)
        np.testing.assert_allclose(q, scipy.linalg.polar(np.asarray(g))[0], atol=1e-12)
        np.testing.assert_allclose(orthogonalize(g.T, method="svd"), q.T, atol=1e-12)


def test_svd_rank_deficient_maps_null_space_to_zero(key):
    k1, k2 = jax.random.split(key)
    u, v = jax.random.normal(k1, (5,)), jax.random.normal(k2, (3,))
    q = orthogonalize(jnp.outer(u, v), method="svd")
    expected = jnp.outer(u / jnp.linalg.norm(u), v / jnp.linalg.norm(v))
    np.testing.assert_allclose(q, expected, atol=1e-5)
    np.testing.assert_allclose(orthogonalize(jnp.zeros((4, 6)), method="svd"), 0.0)


@pytest.mark.parametrize("shape", [(24, 64), (32, 32)])
def test_quintic_singular_values_in_design_band(key, shape):
    g = _well_conditioned(key, *shape)
    s = _svals(_ortho(g, steps=5, coeffs="quintic"))
    assert s.min() > 0.65 and s.max() < 1.21, (s.min(), s.max())


def test_polar_express_is_closer_to_one_than_quintic(key):
    g = _well_conditioned(key, 32, 96, cond=100.0)
    s_pe = _svals(_ortho(g, coeffs="polar_express"))
    s_q = _svals(_ortho(g, coeffs="quintic"))
    assert np.abs(s_pe - 1).max() < 0.15
    assert np.abs(s_pe - 1).max() < np.abs(s_q - 1).max()
    assert np.abs(s_pe - 1).mean() < np.abs(s_q - 1).mean()


def test_polar_express_table_is_a_verified_minimax_composite():
    """Compose the 5 odd quintics on [1e-3, 1]: the image lies in [0.85, 1.15] and its extremes
    are symmetric about 1 (equioscillation), which is what the published table claims."""
    x = np.geomspace(1e-3, 1.0, 200_001)
    y = x.copy()
    for a, b, c in ns_coefficients("polar_express", 5):
        y = a * y + b * y**3 + c * y**5
    assert 0.85 < y.min() and y.max() < 1.15
    np.testing.assert_allclose(y.min() + y.max(), 2.0, atol=1e-6)
    # More steps continue with the classical quintic and converge to 1.
    y = x.copy()
    for a, b, c in ns_coefficients("polar_express", 8):
        y = a * y + b * y**3 + c * y**5
    assert np.abs(y - 1).max() < 1e-3
    assert ns_coefficients("polar_express", 3) == POLAR_EXPRESS[:3]


@pytest.mark.parametrize("method", ["svd", "newton_schulz", "gram_newton_schulz", "auto"])
def test_batched_stack_equals_per_matrix(key, method):
    g = _well_conditioned(key, 8, 20, batch=(2, 3))
    out = _ortho(g, method=method)
    for i, j in [(0, 0), (1, 2)]:
        np.testing.assert_allclose(out[i, j], _ortho(g[i, j], method=method), atol=2e-6, rtol=0)


def test_newton_schulz_matches_optax_and_gram_form(key):
    g = jax.random.normal(key, (16, 48))
    plain = _ortho(g, eps=1e-8)
    ref = jax.jit(optax_muon.orthogonalize_via_newton_schulz)(g, jnp.asarray(QUINTIC), eps=1e-8)
    np.testing.assert_allclose(plain, ref, atol=1e-6)
    gram = _ortho(g, method="gram_newton_schulz", eps=1e-8)
    np.testing.assert_allclose(gram, plain, atol=1e-5 * float(jnp.abs(plain).max()))
    np.testing.assert_allclose(_ortho(g.T, eps=1e-8), plain.T, atol=1e-7)


def test_custom_coefficients(key):
    g = jax.random.normal(key, (6, 10))
    assert ns_coefficients(QUINTIC, 5) == ns_coefficients("quintic", 5)
    assert ns_coefficients([QUINTIC] * 4, 4) == (QUINTIC,) * 4
    np.testing.assert_allclose(_ortho(g, coeffs=QUINTIC), _ortho(g, coeffs="quintic"), rtol=0)
    # The classical (15/8, -10/8, 3/8) iteration converges to the exact polar factor.
    s = _svals(_ortho(_well_conditioned(key, 6, 10), steps=25, coeffs=(1.875, -1.25, 0.375)))
    np.testing.assert_allclose(s, 1.0, atol=1e-4)


def test_bfloat16_compute_returns_input_dtype(key):
    g = _well_conditioned(key, 16, 48)
    out = _ortho(g, dtype=jnp.bfloat16)
    assert out.dtype == jnp.float32
    s = _svals(out)
    assert s.min() > 0.5 and s.max() < 1.3
    # "auto" in bfloat16: the Gram form, restarted every 3 steps
    np.testing.assert_allclose(
        _ortho(g, method="auto", dtype=jnp.bfloat16),
        _ortho(g, method="gram_newton_schulz", dtype=jnp.bfloat16, restart=3),
        rtol=0,
    )


def test_restarted_gram_holds_in_bfloat16_where_the_plain_gram_form_blows_up():
    """A decaying spectrum (128 x 512, s_i = exp(-i / 10) + 1e-3), bfloat16 compute, against the
    same polynomial in float32."""
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.standard_normal((128, 128)))
    v, _ = np.linalg.qr(rng.standard_normal((512, 128)))
    g = jnp.asarray((u * (np.exp(-np.arange(128) / 10.0) + 1e-3)) @ v.T, jnp.float32)
    ref = np.asarray(orthogonalize(g, method="newton_schulz"), np.float64)

    def run(**kw):
        out = orthogonalize(g, dtype=jnp.bfloat16, **kw).astype(jnp.float32)
        out = np.asarray(out, np.float64)
        return np.abs(out - ref).max(), _svals(out).max()

    err_gram, top_gram = run(method="gram_newton_schulz")
    err_restart, top_restart = run(method="gram_newton_schulz", restart=3)
    err_plain, _ = run(method="newton_schulz")
    assert top_gram > 2.0  # the unrestarted recursion: singular values far above 1.2
    assert top_restart < 1.25 and err_restart < err_plain < err_gram
    with pytest.raises(ValueError, match="restart=0"):
        orthogonalize(g, method="gram_newton_schulz", restart=0)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(method="qr"), "method='qr'"),
        (dict(coeffs="cubic"), "coeffs='cubic'"),
        (dict(coeffs=[QUINTIC] * 3), "steps=5"),
        (dict(steps=0), "steps=0"),
        (dict(coeffs=(1.0, 2.0)), r"\(a, b, c\)"),
    ],
)
def test_bad_input(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        orthogonalize(jnp.ones((3, 4)), **kwargs)
    with pytest.raises(ValueError, match=r"\(4,\)"):
        orthogonalize(jnp.ones((4,)))


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (3, 5, 8)])
def test_preconditionings_follow_their_definitions(key, shape):
    from geomopt.optim._orthogonalize import precondition

    g = np.asarray(jax.random.normal(key, shape), np.float64)
    wide = np.swapaxes(g, -1, -2) if shape[-2] > shape[-1] else g
    x = jnp.asarray(wide, jnp.float32)
    sv = lambda a: np.linalg.svd(np.asarray(a, np.float64), compute_uv=False)  # noqa: E731
    np.testing.assert_allclose(sv(precondition(x, "spectral", 0.0))[..., 0], 1.0, rtol=1e-5)
    fro = sv(precondition(x, "frobenius", 0.0))
    np.testing.assert_allclose(np.sum(fro**2, axis=-1), 1.0, rtol=1e-5)
    s4 = sv(precondition(x, "schatten", 0.0))  # Schatten-4 norm 1
    np.testing.assert_allclose(np.sum(s4**4, axis=-1), 1.0, rtol=1e-5)
    # AOL: row i divided by sqrt(sum_j |(G G^T)_ij|), written out in numpy
    gram = wide @ np.swapaxes(wide, -1, -2)
    want = wide / np.sqrt(np.abs(gram).sum(axis=-1))[..., :, None]
    got = precondition(x, "aol", 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert sv(got).max() <= 1.0 + 1e-5  # Gershgorin: the rescaled Gram has spectrum in [0, 1]


def test_every_preconditioning_orthogonalizes(key):
    g = jax.random.normal(key, (16, 48))
    exact = orthogonalize(g, method="svd")
    for pre in ("frobenius", "spectral", "aol", "schatten"):
        got = orthogonalize(g, preconditioning=pre, coeffs="polar_express", steps=8)
        np.testing.assert_allclose(got, exact, atol=0.15, err_msg=pre)
    with pytest.raises(ValueError, match="preconditioning='l2': expected one of"):
        orthogonalize(g, preconditioning="l2")
