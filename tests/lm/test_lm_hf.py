"""GPT-2 weights in and out of the Hugging Face layout, checked live against ``transformers``.

Opt-in (torch and transformers are the ``hf`` group): ``uv run --group hf pytest
tests/lm/test_lm_hf.py``. Without them these tests skip, unless ``GEOMOPT_REQUIRE_HF=1`` (set
by ``.ci/run`` where it installs the group), which makes a missing group a failure; the default
suite checks the same format against committed fixtures made by ``transformers``
(``test_lm_hf_fixture.py``).
"""

import os

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

os.environ["HF_HUB_OFFLINE"] = "1"
_OPT_IN = "the live transformers check is opt-in: uv run --group hf pytest tests/lm/test_lm_hf.py"
if os.environ.get("GEOMOPT_REQUIRE_HF") == "1":  # CI installed the group: no silent skip
    try:
        import torch
        import transformers
    except ImportError as e:
        pytest.fail(f"GEOMOPT_REQUIRE_HF=1 but the hf group is not importable: {e}", False)
else:
    torch = pytest.importorskip("torch", reason=_OPT_IN)
    transformers = pytest.importorskip("transformers", reason=_OPT_IN)

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
