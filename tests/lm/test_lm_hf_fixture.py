"""GPT-2 weights in and out of the Hugging Face layout, checked against committed fixtures.

The folders under ``fixtures/`` were written once by ``transformers`` (``make_hf_gpt2.py``):
``save_pretrained`` of a random small GPT-2 and the logits it computes. These tests need no
torch; the live comparison with ``transformers`` is ``test_lm_hf.py`` (opt-in group ``hf``).
"""

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file

from geomopt.lm import GPT2, GPT2Config
from geomopt.lm._hf import load_hf_gpt2, save_hf_gpt2

FIXTURES = Path(__file__).parent / "fixtures"
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu": "gelu_exact"}


def _reference(folder: Path):
    ref = np.load(folder / "reference.npz")
    return jnp.asarray(ref["tokens"]), ref["logits"]


@pytest.mark.parametrize("hf_activation", sorted(ACTIVATIONS))
def test_import_matches_transformers_logits(hf_activation):
    folder = FIXTURES / f"hf_gpt2_{hf_activation}"
    tokens, logits = _reference(folder)
    model = load_hf_gpt2(folder, dtype="float32")
    assert model.config.activation == ACTIVATIONS[hf_activation]
    np.testing.assert_allclose(np.asarray(model(tokens)), logits, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("hf_activation", sorted(ACTIVATIONS))
def test_export_reproduces_the_transformers_files(tmp_path, hf_activation):
    """Import, export: the same tensors under the same names, the config fields transformers
    reads, and a re-import that computes the reference logits."""
    folder = FIXTURES / f"hf_gpt2_{hf_activation}"
    tokens, logits = _reference(folder)
    save_hf_gpt2(load_hf_gpt2(folder, dtype="float32"), tmp_path)
    want, got = (
        load_file(str(folder / "model.safetensors")),
        load_file(str(tmp_path / "model.safetensors")),
    )
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key].dtype == value.dtype, key
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    want_cfg = json.loads((folder / "config.json").read_text())
    got_cfg = json.loads((tmp_path / "config.json").read_text())
    for field in (
        "model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
        "activation_function", "layer_norm_epsilon", "scale_attn_weights",
        "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "tie_word_embeddings",
    ):  # fmt: skip
        assert got_cfg[field] == want_cfg[field], field
    back = load_hf_gpt2(tmp_path, dtype="float32")
    np.testing.assert_allclose(np.asarray(back(tokens)), logits, atol=2e-5, rtol=1e-5)


def test_export_without_biases_writes_zero_biases(tmp_path):
    """HF GPT-2 always has biases: a bias-free model is exported with zeros (the same function)
    in the fixture's layout."""
    layout = load_file(str(FIXTURES / "hf_gpt2_gelu_new" / "model.safetensors"))
    hf = json.loads((FIXTURES / "hf_gpt2_gelu_new" / "config.json").read_text())
    cfg = GPT2Config(vocab_size=hf["vocab_size"], n_layer=hf["n_layer"], n_head=hf["n_head"],
                     d_model=hf["n_embd"], context=hf["n_positions"], bias=False,
                     dtype="float32")  # fmt: skip
    ours = GPT2(cfg, rngs=nnx.Rngs(3))
    save_hf_gpt2(ours, tmp_path)
    got = load_file(str(tmp_path / "model.safetensors"))
    assert {k: v.shape for k, v in got.items()} == {k: v.shape for k, v in layout.items()}
    biases = [k for k in got if k.endswith(".bias") and ".ln_" not in k]
    assert biases and all(not got[k].any() for k in biases)
    tokens, _ = _reference(FIXTURES / "hf_gpt2_gelu_new")
    np.testing.assert_allclose(
        np.asarray(load_hf_gpt2(tmp_path, dtype="float32")(tokens)),
        np.asarray(ours(tokens)),
        atol=1e-6,
    )


def test_refuses_unsupported_config_and_bad_shapes(tmp_path):
    folder = FIXTURES / "hf_gpt2_gelu_new"
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    cfg_path = tmp_path / "config.json"
    good = json.loads(cfg_path.read_text())
    cfg_path.write_text(json.dumps({**good, "scale_attn_by_inverse_layer_idx": True}))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True"):
        load_hf_gpt2(tmp_path)
    cfg_path.write_text(json.dumps({**good, "n_positions": 10}))
    with pytest.raises(ValueError, match=r"'wpe.weight' has shape \(12, 12\), expected \(10, 12\)"):
        load_hf_gpt2(tmp_path)
    cfg_path.write_text(json.dumps(good))
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        load_hf_gpt2(tmp_path)


def test_export_of_a_padded_gpt2_table_writes_the_true_vocabulary(tmp_path):
    """A 124M-style token table padded to 50304 rows is exported as GPT-2's 50257 (what
    transformers and the GPT-2 tokenizer expect); the logits of the real tokens are unchanged."""
    cfg = GPT2Config(vocab_size=50304, n_layer=1, n_head=2, d_model=8, context=16, dtype="float32")
    ours = GPT2(cfg, rngs=nnx.Rngs(0))
    save_hf_gpt2(ours, tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    assert hf["vocab_size"] == 50257 and hf["eos_token_id"] == 50256
    got = load_file(str(tmp_path / "model.safetensors"))
    assert got["transformer.wte.weight"].shape == (50257, 8)
    back = load_hf_gpt2(tmp_path, dtype="float32")
    tokens = np.array([[0, 5, 50256, 17]])
    np.testing.assert_allclose(
        np.asarray(back(tokens)), np.asarray(ours(tokens))[..., :50257], atol=1e-6
    )
    save_hf_gpt2(ours, tmp_path / "padded", vocab_size=50304)  # asked for: kept
    assert json.loads((tmp_path / "padded" / "config.json").read_text())["vocab_size"] == 50304
