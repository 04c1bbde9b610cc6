"""Generation: cached decoding equals full recomputation, one compilation for all tokens and
settings, top-k / top-p sets, batching, and loading from run / HF folders."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from geomopt.lm import GPT2, GPT2Config
from geomopt.lm._sample import TRACES, filter_logits, load_model, sample

CFG = GPT2Config(vocab_size=50, n_layer=2, n_head=2, d_model=16, context=24, dtype="float32")


@pytest.fixture(scope="module")
def model():
    m = GPT2(CFG, rngs=nnx.Rngs(0))
    # larger weights: a peaked, prompt-dependent next-token distribution
    params = nnx.state(m, nnx.Param)
    nnx.update(m, jax.tree.map(lambda x: x * 20 if x.ndim == 2 else x, params))
    return m


@jax.jit
def _full_logits(params, tokens_1xC):
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: GPT2(CFG, rngs=nnx.Rngs(0))))
    return nnx.merge(graphdef, params)(tokens_1xC)


def _greedy_reference(model, prompt, n):
    """Greedy continuation by recomputing the full (uncached) forward pass for every token; the
    sequence is zero-padded to the context (causal: later positions do not matter)."""
    params = nnx.state(model, nnx.Param)
    seq = list(prompt)
    for _ in range(n):
        padded = jnp.asarray([seq + [0] * (CFG.context - len(seq))])
        logits = _full_logits(params, padded)
        seq.append(int(jnp.argmax(logits[0, len(seq) - 1])))
    return seq[len(prompt) :]


def test_cached_greedy_equals_full_recomputation_for_ragged_batch(model):
    prompts = [[1, 2, 3], [7], [4, 5, 6, 7, 8]]
    out = sample(model, prompts, max_new_tokens=6, temperature=0.0, key=jax.random.key(0))
    for p, o in zip(prompts, out, strict=True):
        assert o.tolist() == _greedy_reference(model, p, 6)
    alone = sample(model, [prompts[2]], max_new_tokens=6, temperature=0.0, key=jax.random.key(1))
    assert alone[0].tolist() == out[2].tolist()


def test_step_compiles_once_for_all_tokens_and_settings(model):
    prompts = [[1, 2], [3, 4]]
    sample(model, prompts, max_new_tokens=3, key=jax.random.key(0))
    before = dict(TRACES)
    sample(model, prompts, max_new_tokens=3, temperature=0.7, top_k=5, key=jax.random.key(2))
    sample(model, [[5, 6], [9, 9]], max_new_tokens=3, top_p=0.5, key=jax.random.key(3))
    assert TRACES == before  # same batch and buffer length: no new trace at all
    sample(model, prompts, max_new_tokens=12, key=jax.random.key(0))  # 12 more tokens
    sample(model, [[7], [1, 2, 3, 4, 5]], max_new_tokens=1, key=jax.random.key(0))
    assert TRACES["decode_step"] == before["decode_step"]  # every length: the same step


def test_no_recompilation_for_another_max_new_tokens(model, compiles):
    sample(model, [[1, 2, 3]], max_new_tokens=2, key=jax.random.key(0))
    with compiles() as log:
        sample(model, [[1, 2, 3]], max_new_tokens=9, key=jax.random.key(1))
    assert log.count("_decode_step") == 0, log.names


def test_sampling_is_seeded_and_respects_top_k(model):
    prompts = [[1, 2, 3]] * 4
    a = sample(model, prompts, max_new_tokens=8, temperature=2.0, key=jax.random.key(5))
    b = sample(model, prompts, max_new_tokens=8, temperature=2.0, key=jax.random.key(5))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert len({tuple(x.tolist()) for x in a}) > 1  # rows draw independently
    g = sample(model, prompts[:1], max_new_tokens=8, temperature=0.0, key=jax.random.key(0))
    k1 = sample(model, prompts, max_new_tokens=8, temperature=5.0, top_k=1, key=jax.random.key(9))
    assert all(x.tolist() == g[0].tolist() for x in k1)  # top-k 1 is greedy


def test_filter_logits_sets():
    logits = jnp.log(jnp.asarray([[0.05, 0.4, 0.3, 0.15, 0.1]]))
    kept = lambda **kw: np.isfinite(np.asarray(filter_logits(logits, 1.0, **kw)))[0]  # noqa: E731
    np.testing.assert_array_equal(kept(top_k=2, top_p=1.0), [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(kept(top_k=0, top_p=0.5), [0, 1, 1, 0, 0])  # 0.4 < 0.5
    np.testing.assert_array_equal(kept(top_k=0, top_p=0.4), [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(kept(top_k=0, top_p=0.86), [0, 1, 1, 1, 1])
    np.testing.assert_array_equal(kept(top_k=0, top_p=1.0), [1, 1, 1, 1, 1])
    np.testing.assert_array_equal(kept(top_k=3, top_p=0.9), [0, 1, 1, 1, 0])


def test_rejects_too_long_and_bad_tokens(model):
    with pytest.raises(ValueError, match="exceeds the model context 24"):
        sample(model, [[1] * 20], max_new_tokens=5, key=jax.random.key(0))
    msg = r"prompt 30 \+ max_new_tokens 4 = 34 exceeds .* 24: .* at most 20 tokens"
    with pytest.raises(ValueError, match=msg):  # a prompt longer than the context
        sample(model, [[1], [1] * 30], max_new_tokens=4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="prompt token 50 outside"):
        sample(model, [[50]], max_new_tokens=1, key=jax.random.key(0))


def test_load_model_from_run_checkpoint_and_hf_folder(model, tmp_path):
    import json

    import orbax.checkpoint as ocp

    from geomopt.lm._hf import save_hf_gpt2

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    model_fields = {f: getattr(CFG, f) for f in CFG.__dataclass_fields__}
    (run / "config.json").write_text(json.dumps({"config": {"model": model_fields}}))
    params = jax.tree.leaves(nnx.state(model, nnx.Param))
    with ocp.CheckpointManager(run / "checkpoints") as mngr:
        state = {"params": params, "opt_state": [jnp.zeros(3)]}
        mngr.save(7, args=ocp.args.StandardSave(state))
        mngr.wait_until_finished()
    tokens = jnp.asarray([[1, 2, 3, 4]])
    loaded = load_model(run)
    np.testing.assert_array_equal(np.asarray(loaded(tokens)), np.asarray(model(tokens)))
    save_hf_gpt2(model, tmp_path / "hf")
    hf = load_model(tmp_path / "hf", dtype="float32")
    np.testing.assert_allclose(np.asarray(hf(tokens)), np.asarray(model(tokens)), atol=1e-4)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path)


def test_tiktoken_cache_detection(tmp_path, monkeypatch):
    from geomopt.lm._sample import tiktoken_gpt2_missing

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    msg = tiktoken_gpt2_missing()
    assert msg is not None and str(tmp_path) in msg and "TIKTOKEN_CACHE_DIR" in msg
    for line in msg.splitlines():
        if "->" in line:
            (tmp_path / line.split("-> ")[1].rsplit("/", 1)[1]).write_bytes(b"x")
    assert tiktoken_gpt2_missing() is None
