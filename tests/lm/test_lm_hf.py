"""GPT-2 weights in and out of the Hugging Face layout, checked against ``transformers``."""

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from geomopt.lm import GPT2, GPT2Config  # noqa: E402
from geomopt.lm._hf import load_hf_gpt2, save_hf_gpt2  # noqa: E402


def _hf_model(activation="gelu_new", seed=0):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        vocab_size=61,
        n_positions=12,
        n_embd=16,
        n_layer=2,
        n_head=2,
        activation_function=activation,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # non-trivial biases and gains, larger weights
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


TOKENS = np.random.default_rng(0).integers(0, 61, (2, 12))


def _hf_logits(model):
    with torch.no_grad():
        return model(torch.tensor(TOKENS)).logits.numpy()


@pytest.mark.parametrize("activation", ["gelu_new", "gelu"])
def test_import_matches_transformers_logits(tmp_path, activation):
    hf = _hf_model(activation)
    hf.save_pretrained(tmp_path)
    ours = load_hf_gpt2(tmp_path, dtype="float32")
    assert ours.config.activation == ("gelu_tanh" if activation == "gelu_new" else "gelu_exact")
    np.testing.assert_allclose(
        np.asarray(ours(jnp.asarray(TOKENS))), _hf_logits(hf), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("bias", [True, False])
def test_export_loads_in_transformers_with_equal_logits(tmp_path, bias):
    cfg = GPT2Config(
        vocab_size=61, n_layer=2, n_head=2, d_model=16, context=12, bias=bias, dtype="float32"
    )
    ours = GPT2(cfg, rngs=nnx.Rngs(3))
    save_hf_gpt2(ours, tmp_path)
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    np.testing.assert_allclose(
        _hf_logits(hf), np.asarray(ours(jnp.asarray(TOKENS))), atol=1e-5, rtol=1e-5
    )
    back = load_hf_gpt2(tmp_path, dtype="float32")  # round trip
    np.testing.assert_allclose(
        np.asarray(back(jnp.asarray(TOKENS))), np.asarray(ours(jnp.asarray(TOKENS))), atol=1e-6
    )


def test_refuses_unsupported_config_and_bad_shapes(tmp_path):
    hf = _hf_model()
    hf.save_pretrained(tmp_path)
    cfg_path = tmp_path / "config.json"
    good = json.loads(cfg_path.read_text())
    cfg_path.write_text(json.dumps({**good, "scale_attn_by_inverse_layer_idx": True}))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True"):
        load_hf_gpt2(tmp_path)
    cfg_path.write_text(json.dumps({**good, "n_positions": 10}))
    with pytest.raises(ValueError, match=r"'wpe.weight' has shape \(12, 16\), expected \(10, 16\)"):
        load_hf_gpt2(tmp_path)
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        (tmp_path / "model.safetensors").unlink()
        load_hf_gpt2(tmp_path)
