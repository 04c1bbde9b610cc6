"""Muon: optax.contrib.muon as oracle, label routing to AdamW, batched grouping, convergence,
no recompilation, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geomopt.optim._muon as muon_module
from geomopt.optim import labels_by_path, muon, orthogonalize, orthogonalize_grouped


def _params(key):
    ks = jax.random.split(key, 6)
    return {
        "qkv": jax.random.normal(ks[0], (8, 24)),
        "fc": jax.random.normal(ks[1], (8, 32)),
        "proj": jax.random.normal(ks[2], (32, 8)),
        "sq": jax.random.normal(ks[3], (8, 8)),
        "bias": jax.random.normal(ks[4], (8,)),
    }


def _run(opt, params, n_steps=4):
    state = opt.init(params)
    update = jax.jit(opt.update)
    for i in range(n_steps):
        grads = jax.tree.map(lambda p, i=i: jnp.sin((i + 1.0) * p) + 0.1 * p, params)
        updates, state = update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return params, state


@pytest.mark.parametrize(
    "ours, theirs, atol",
    [
        (dict(), dict(), 1e-5),  # method="auto": same polynomial in Gram form
        (
            dict(
                method="newton_schulz",
                nesterov=False,
                momentum=0.9,
                shape_scaling="rms",
                weight_decay=0.1,
                adam_weight_decay=0.01,
            ),
            dict(
                nesterov=False,
                beta=0.9,
                consistent_rms=0.2,
                weight_decay=0.1,
                adam_weight_decay=0.01,
            ),
            1e-6,
        ),
    ],
)
def test_matches_optax_contrib_muon(key, ours, theirs, atol):
    params = _params(key)
    got, _ = _run(muon(0.02, **ours), params)
    ref, _ = _run(optax.contrib.muon(0.02, **theirs), params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=atol, rtol=0), got, ref)


def test_label_routing_sends_embeddings_and_vectors_to_adamw(key):
    params = _params(key)
    params["embed"] = jax.random.normal(jax.random.fold_in(key, 9), (40, 8))
    label_fn = labels_by_path(lambda path: "embed" in path)
    assert label_fn(params) == {
        "qkv": "muon",
        "fc": "muon",
        "proj": "muon",
        "sq": "muon",
        "bias": "adam",
        "embed": "adam",
    }
    got, _ = _run(muon(0.02, adam_learning_rate=1e-3, label_fn=label_fn), params)
    adam_leaves = {k: params[k] for k in ("bias", "embed")}
    ref, _ = _run(
        optax.adamw(1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, nesterov=True), adam_leaves
    )
    for k in ("bias", "embed"):
        np.testing.assert_allclose(got[k], ref[k], atol=1e-7, rtol=0)


def test_same_shape_matrices_share_one_batched_call(key, monkeypatch):
    calls = []

    def counting(x, **kw):
        calls.append(x.shape)
        return orthogonalize(x, **kw)

    monkeypatch.setattr(muon_module, "orthogonalize", counting)
    tree = [{k: v for k, v in _params(key).items() if k != "bias"}]
    tree.append({"fc2": tree[0]["fc"] + 1.0, "stack": jax.random.normal(key, (2, 32, 8))})
    grouped = lambda t: orthogonalize_grouped(t, shape_scaling="fan_ratio", method="newton_schulz")
    out = jax.jit(grouped)(tree)
    # One call per shape up to transpose: (8, 24), (8, 32) incl. (32, 8) and the stack, (8, 8).
    assert sorted(calls) == [(1, 8, 8), (1, 8, 24), (5, 8, 32)]

    def ref(x):
        scale = max(1.0, x.shape[-1] / x.shape[-2]) ** 0.5
        return scale * orthogonalize(x, method="newton_schulz")

    expected = jax.jit(lambda t: jax.tree.map(ref, t))(tree)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6), out, expected)


def test_converges_on_matrix_quadratic(key):
    target = {"w": jax.random.normal(key, (6, 10)), "b": jnp.ones(10)}
    loss = lambda p: sum(jnp.sum((p[k] - target[k]) ** 2) for k in p)
    params = jax.tree.map(jnp.zeros_like, target)
    for method in ("newton_schulz", "svd"):
        opt = muon(
            optax.linear_schedule(0.3, 0.0, 150),
            method=method,
            adam_learning_rate=optax.linear_schedule(0.1, 0.0, 150),
        )
        state = opt.init(params)

        def step(carry, _, opt=opt):
            p, s = carry
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None

        (p_end, _), _ = jax.jit(lambda c: jax.lax.scan(step, c, None, length=150))((params, state))
        assert loss(p_end) < 1e-2 * loss(params), (method, loss(p_end))


def test_jitted_step_does_not_recompile_with_new_learning_rate(key):
    params = _params(key)
    traces = []

    @jax.jit
    def step(params, state, grads, lr):
        traces.append(1)
        opt = muon(lr, weight_decay=0.01)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state = muon(0.02, weight_decay=0.01).init(params)
    grads = jax.tree.map(jnp.cos, params)
    p1, state = step(params, state, grads, jnp.float32(0.02))
    with jax.log_compiles(True):
        p2, _ = step(p1, state, grads, jnp.float32(0.01))
    assert len(traces) == 1
    assert not np.allclose(p1["qkv"], p2["qkv"])


def test_bfloat16_compute_dtype_keeps_param_dtype(key):
    params = {k: v for k, v in _params(key).items() if k in ("qkv", "bias")}
    got, state = _run(muon(0.02, compute_dtype=jnp.bfloat16), params, n_steps=2)
    ref, _ = _run(muon(0.02), params, n_steps=2)
    for k in params:
        assert got[k].dtype == jnp.float32
        step_ref = ref[k] - params[k]
        diff = jnp.linalg.norm(got[k] - params[k] - step_ref) / jnp.linalg.norm(step_ref)
        assert diff < 0.1, (k, float(diff))


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(learning_rate=-1.0), "learning_rate=-1.0"),
        (dict(momentum=1.0), "momentum=1.0"),
        (dict(shape_scaling="spectral"), "shape_scaling='spectral'"),
        (dict(method="qr"), "method='qr'"),
        (dict(coeffs="cubic"), "coeffs='cubic'"),
        (dict(weight_decay=-0.1), "weight_decay=-0.1"),
    ],
)
def test_bad_arguments(kwargs, needle):
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
        muon(**kwargs)


def test_bad_labels(key):
    params = _params(key)
    with pytest.raises(ValueError, match="'sgd'"):
        muon(label_fn=lambda p: jax.tree.map(lambda _: "sgd", p)).init(params)
    opt = muon(label_fn=lambda p: jax.tree.map(lambda _: "muon", p))
    with pytest.raises(ValueError, match=r"\(8,\)"):
        opt.update(params, opt.init(params), params)


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("preconditioning", ["frobenius", "spectral", "aol", "schatten"])
def test_preconditioning_and_adaptive_match_optax(key, preconditioning, adaptive):
    params = _params(key)
    got, _ = _run(muon(0.02, preconditioning=preconditioning, adaptive=adaptive), params)
    ref, _ = _run(
        optax.contrib.muon(0.02, preconditioning=preconditioning, adaptive=adaptive), params
    )
    # adaptive multiplies by <G, msign(G)> (about 10 here), so its rounding grows with it
    atol = 1e-5 if adaptive else 1e-6
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=atol, rtol=0), got, ref)


def test_adaptive_scales_by_the_dual_norm(key):
    g = {"w": jax.random.normal(key, (6, 10))}
    plain = orthogonalize_grouped(g)["w"]
    scaled = orthogonalize_grouped(g, adaptive=True)["w"]
    u, s, vt = np.linalg.svd(np.asarray(g["w"]), full_matrices=False)
    # <G, msign(G)> is the nuclear norm of G, up to Newton-Schulz's inexact singular values
    factor = float(np.sum(np.asarray(g["w"]) * np.asarray(plain)))
    np.testing.assert_allclose(scaled, factor * plain, rtol=1e-5)
    assert 0.6 * s.sum() < factor < 1.2 * s.sum()


def test_bad_preconditioning_is_named():
    with pytest.raises(ValueError, match="preconditioning='fro': expected one of"):
        muon(0.02, preconditioning="fro")
    with pytest.raises(ValueError, match="adaptive=1: expected True or False"):
        muon(0.02, adaptive=1)


def test_cautious_weight_decay_follows_its_formula(key):
    from geomopt.optim import add_cautious_decayed_weights

    k1, k2 = jax.random.split(key)
    w = {"a": jax.random.normal(k1, (5, 7)), "b": jax.random.normal(k2, (7,))}
    u = jax.tree.map(lambda x: jnp.sin(3.0 * x) - 0.2, w)
    wd, lr = 0.3, 0.1
    tx = optax.chain(add_cautious_decayed_weights(wd), optax.scale_by_learning_rate(lr))
    step, _ = tx.update(u, tx.init(w), w)
    for name in ("a", "b"):  # W - lr (u + wd 1[u W >= 0] W), written out in numpy
        un, wn = np.asarray(u[name]), np.asarray(w[name])
        want = -lr * (un + wd * (un * wn >= 0) * wn)
        np.testing.assert_allclose(step[name], want, rtol=1e-6)
    masked = add_cautious_decayed_weights(wd, mask={"a": True, "b": False})
    out, _ = masked.update(u, masked.init(w), w)
    np.testing.assert_array_equal(out["b"], u["b"])  # masked out: no decay


def test_muon_cautious_decays_only_where_the_update_agrees(key):
    params = _params(key)
    grads = jax.tree.map(lambda p: jnp.sin(2.0 * p) + 0.1 * p, params)
    lr, wd = 0.02, 0.5
    plain = muon(lr, weight_decay=0.0)
    base, _ = plain.update(grads, plain.init(params), params)
    cautious = muon(lr, weight_decay=wd, cautious_weight_decay=True)
    got, _ = cautious.update(grads, cautious.init(params), params)
    for name in ("qkv", "fc", "proj", "sq"):  # the Muon leaves
        u = -np.asarray(base[name]) / lr  # the direction Muon subtracts
        w = np.asarray(params[name])
        want = -lr * (u + wd * (u * w >= 0) * w)
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-7)
        assert 0 < np.mean(u * w >= 0) < 1  # some weights decayed, some not
    np.testing.assert_allclose(got["bias"], base["bias"])  # AdamW leaves: untouched
    with pytest.raises(ValueError, match="cautious_weight_decay='yes'"):
        muon(lr, cautious_weight_decay="yes")


@pytest.mark.parametrize("n_blocks", [3, 12])  # Q, K, V; and 4 heads of each
@pytest.mark.parametrize("adaptive", [False, True])
def test_split_blocks_equal_orthogonalizing_the_slices(key, n_blocks, adaptive):
    from geomopt.optim import blocks_by_path

    k1, k2 = jax.random.split(key)
    g = {"qkv": jax.random.normal(k1, (16, 48)), "fc": jax.random.normal(k2, (16, 64))}
    blocks = blocks_by_path("qkv", n_blocks)(g)
    assert blocks == {"qkv": n_blocks, "fc": 1}
    got = orthogonalize_grouped(g, shape_scaling="fan_ratio", adaptive=adaptive, blocks=blocks)
    whole = orthogonalize_grouped({"fc": g["fc"]}, shape_scaling="fan_ratio", adaptive=adaptive)
    np.testing.assert_allclose(got["fc"], whole["fc"], rtol=1e-6)
    width = 48 // n_blocks
    for b in range(n_blocks):  # each column block as its own matrix, scaled by its own shape
        cols = slice(b * width, (b + 1) * width)
        alone = orthogonalize_grouped(
            {"x": g["qkv"][:, cols]}, shape_scaling="fan_ratio", adaptive=adaptive
        )["x"]
        np.testing.assert_allclose(got["qkv"][:, cols], alone, rtol=1e-5, atol=1e-6)


def test_muon_blocks_on_gpt2_qkv_and_bad_splits(key):
    from geomopt.optim import blocks_by_path

    params = _params(key)  # qkv is 8 x 24: Q, K, V of width 8
    tx = muon(0.02, blocks=blocks_by_path("qkv", 3))
    out, _ = tx.update(params, tx.init(params), params)
    for b in range(3):
        block = out["qkv"][:, 8 * b : 8 * (b + 1)]
        s = np.linalg.svd(np.asarray(block), compute_uv=False)
        assert s.min() > 0.5 * s.max()  # each block near-orthogonal on its own
    with pytest.raises(ValueError, match="24 columns do not split into 5 equal blocks"):
        bad = muon(0.02, blocks=blocks_by_path("qkv", 5))
        bad.update(params, bad.init(params), params)
    with pytest.raises(ValueError, match="n_blocks=0"):
        blocks_by_path("qkv", 0)


@pytest.mark.parametrize("neuron_axis", [-1, -2])
def test_normuon_follows_its_formula(key, neuron_axis):
    """Three steps of muon(normuon=True) against plain Muon's directions put through the
    NorMuon recursion written out in numpy (per-neuron EMA of mean squares, divide, restore
    the Frobenius norm)."""
    params = _params(key)
    lr, beta2 = 0.02, 0.9
    plain, nor = muon(lr), muon(lr, normuon=True, normuon_beta2=beta2, neuron_axis=neuron_axis)
    s_plain, s_nor = plain.init(params), nor.init(params)
    over = -2 if neuron_axis == -1 else -1
    nu = {k: 0.0 for k in ("qkv", "fc", "proj", "sq")}
    for t in range(3):
        grads = jax.tree.map(lambda p, t=t: jnp.cos((t + 1.0) * p), params)
        base, s_plain = plain.update(grads, s_plain, params)
        got, s_nor = nor.update(grads, s_nor, params)
        for k in nu:
            o = -np.asarray(base[k], np.float64) / lr
            nu[k] = beta2 * nu[k] + (1 - beta2) * np.mean(o**2, axis=over, keepdims=True)
            scaled = o / (np.sqrt(nu[k]) + 1e-10)
            want = scaled * np.linalg.norm(o) / np.linalg.norm(scaled)
            np.testing.assert_allclose(-np.asarray(got[k]) / lr, want, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(got["bias"], base["bias"])
    # the norm is kept, the neurons are evened out
    o = -np.asarray(got["fc"]) / lr
    assert np.linalg.norm(o) == pytest.approx(np.linalg.norm(-np.asarray(base["fc"]) / lr), 1e-5)
    with pytest.raises(ValueError, match="neuron_axis=0"):
        muon(lr, normuon=True, neuron_axis=0)
