"""HellaSwag scoring: per-ending losses against a direct per-row computation, the three
accuracies, padding/batching invariance, truncation and the file format."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from flax import nnx

from geomopt.lm import GPT2, ByteTokenizer, GPT2Config
from geomopt.lm._hellaswag import (
    HellaSwagExample,
    encode_hellaswag,
    evaluate_hellaswag,
    harness_preprocess,
    hellaswag_evaluator,
    read_hellaswag,
)

CFG = GPT2Config(vocab_size=256, n_layer=1, n_head=2, d_model=16, context=128, dtype="float32")
RECORDS = [
    {
        "ind": i,
        "activity_label": "Cooking",
        "ctx_a": f"A man {i} takes a pan.",
        "ctx_b": "then he",
        "ctx": f"A man {i} takes a pan. then he",
        "endings": ["puts it down.", "eats a very large sandwich [title] now", "runs.", "x"],
        "label": i % 4,
        "split": "val",
    }
    for i in range(5)
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    path = tmp_path_factory.mktemp("hs") / "hellaswag_val.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    model = GPT2(CFG, rngs=nnx.Rngs(0))
    return path, model


def _direct_losses(model, tok, ex):
    """Summed ending cross-entropy of each ending, one unpadded row at a time."""
    ctx = list(tok.encode(ex.context))
    out = []
    for ending in ex.endings:
        end = list(tok.encode(" " + ending))
        row = np.asarray(ctx + end)
        logits = np.asarray(model(jnp.asarray(row[None, :-1])))[0].astype(np.float64)
        logp = logits - scipy.special.logsumexp(logits, axis=-1, keepdims=True)
        ce = -logp[np.arange(len(row) - 1), row[1:]]
        out.append((ce[len(ctx) - 1 :].sum(), ce[len(ctx) - 1 :].mean(), len(ending)))
    return np.asarray(out)


def test_scores_match_direct_computation_and_accuracies(setup):
    path, model = setup
    tok = ByteTokenizer()
    examples = read_hellaswag(path)
    direct = np.stack([_direct_losses(model, tok, ex) for ex in examples])  # E x 4 x 3
    r = evaluate_hellaswag(model, examples, tok, batch_examples=2)
    np.testing.assert_allclose(r["loss_sum"], direct[..., 0], rtol=1e-5)
    np.testing.assert_allclose(r["loss_mean"], direct[..., 1], rtol=1e-5)
    labels = np.asarray([ex.label for ex in examples])
    assert r["acc"] == np.mean(direct[..., 0].argmin(1) == labels)
    assert r["acc_norm"] == np.mean((direct[..., 0] / direct[..., 2]).argmin(1) == labels)
    assert r["acc_token_norm"] == np.mean(direct[..., 1].argmin(1) == labels)
    # relabel every example with its best ending: acc becomes exactly 1
    best = direct[..., 0].argmin(1)
    relabelled = [
        HellaSwagExample(ex.context, ex.endings, int(i))
        for ex, i in zip(examples, best, strict=True)
    ]
    assert evaluate_hellaswag(model, relabelled, tok, batch_examples=3)["acc"] == 1.0


def test_batching_and_padding_do_not_change_scores(setup):
    path, model = setup
    tok = ByteTokenizer()
    examples = read_hellaswag(path)
    a = evaluate_hellaswag(model, examples, tok, batch_examples=1, seq_len=96)
    b = evaluate_hellaswag(model, examples, tok, batch_examples=4, seq_len=96)
    np.testing.assert_allclose(a["loss_sum"], b["loss_sum"], rtol=1e-6)


def test_long_rows_keep_the_ending_and_drop_old_context():
    tok = ByteTokenizer()
    ex = HellaSwagExample("c" * 100, ("ab", "abc", "a", "abcd"), 0)
    enc = encode_hellaswag([ex], tok, seq_len=20)
    assert enc.tokens_Ex4xL1.shape == (1, 4, 21)
    np.testing.assert_array_equal(enc.mask_Ex4xL.sum(-1)[0], [3, 4, 2, 5])  # " " + ending
    row = enc.tokens_Ex4xL1[0, 1]
    assert bytes(row.astype(np.uint8)).endswith(b"c abc")
    assert enc.n_truncated == 4  # every row is longer than 21 tokens: counted
    short = HellaSwagExample("c" * 10, ("ab", "abc", "a", "a" * 11), 0)
    assert encode_hellaswag([short, ex], tok, seq_len=20).n_truncated == 4 + 1


def test_rows_longer_than_the_context_are_reported(setup):
    model, tok = setup[1], ByteTokenizer()
    ex = HellaSwagExample("c" * 200, ("ab", "abc", "a", "abcd"), 0)
    r = evaluate_hellaswag(model, [ex], tok)
    assert r["truncated_rows"] == 4 and r["n"] == 1


def test_training_hook_returns_named_accuracies(setup):
    path, model = setup
    import dataclasses

    from geomopt.lm import TrainConfig

    cfg = dataclasses.replace(TrainConfig(), model=CFG, hellaswag=str(path), hellaswag_examples=3)
    evaluate = hellaswag_evaluator(cfg, batch_examples=2)
    out = evaluate(None, nnx.state(model, nnx.Param))
    assert set(out) == {"hellaswag_acc", "hellaswag_acc_norm", "hellaswag_acc_token_norm"}
    assert all(0.0 <= v <= 1.0 for v in out.values())


def test_harness_text_and_bad_records(tmp_path, setup):
    path, _ = setup
    ex = read_hellaswag(path, text="harness", limit=2)
    assert len(ex) == 2
    assert ex[0].context == "Cooking: A man 0 takes a pan. Then he"
    assert ex[0].endings[1] == "eats a very large sandwich. now"
    assert harness_preprocess("a [header] b  c") == "a b c"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"ctx": "x", "endings": ["a", "b"], "label": 0}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: 2 endings"):
        read_hellaswag(bad)
    bad.write_text('{"ctx": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: not a HellaSwag record"):
        read_hellaswag(bad)
