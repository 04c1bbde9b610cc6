"""Training: N devices equal one, resume equals uninterrupted (also after a killed checkpoint
write), non-finite loss stops at the right step, one compilation per run, noise density."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from geomopt.lm import DataConfig, GPT2Config, NonFiniteLossError, OptimConfig, TrainConfig, train
from geomopt.runs import load_metrics

MODEL = GPT2Config(vocab_size=256, n_layer=1, n_head=2, d_model=32, context=16)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    data = DataConfig(offline_dir=str(root / "corpus"), offline_bytes=200_000)
    return TrainConfig(
        model=MODEL,
        optim=OptimConfig(name="adamw", lr=1e-2),
        data=data,
        batch_size=8,
        steps=6,
        seed=0,
        eval_every=3,
        eval_batches=2,
        log_every=3,
        ckpt_every=2,
        n_devices=1,
        root=str(root / "runs"),
        progress=False,
    )


def losses(cfg, name):
    rows = load_metrics(f"{cfg.root}/{cfg.experiment}/{name}")
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


@pytest.fixture(scope="module")
def reference(base):
    summary = train(dataclasses.replace(base, name="full"))
    return summary, losses(base, "full")


def test_reference_run_learns_and_compiles_once(base, reference):
    summary, curve = reference
    assert sorted(curve) == list(range(1, 7))
    assert curve[6] < curve[1] - 0.3  # adamw on bytes: the loss drops quickly from log(256)
    assert curve[1] == pytest.approx(np.log(256), abs=0.1)
    assert summary["train_step_compilations"] == 1
    rows = load_metrics(f"{base.root}/{base.experiment}/full")
    val = [r for r in rows if "val_loss" in r]
    assert [r["step"] for r in val] == [0, 3, 6]
    assert 0 <= val[-1]["val_acc"] <= 1
    assert all(r["tokens_per_s"] > 0 for r in rows if "tokens_per_s" in r)


def test_other_learning_rate_reuses_the_compiled_step(base, reference):
    summary = train(dataclasses.replace(base, name="lr2", optim=OptimConfig(lr=3e-3)))
    assert summary["train_step_compilations"] == 1
    assert losses(base, "lr2")[1] == reference[1][1]  # same init and batch


def test_resume_equals_uninterrupted_after_killed_checkpoint_write(base, reference):
    cut = dataclasses.replace(base, name="cut", halt_at_step=5)
    train(cut)
    ckpt = base_path(base, "cut") / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir()) == ["2", "4"]
    # a save of step 6 killed half-way leaves orbax's temporary folder behind
    partial = ckpt / "6.orbax-checkpoint-tmp-1733130000"
    (partial / "params").mkdir(parents=True)
    (partial / "params" / "_METADATA").write_text("{")
    messages = []
    train(dataclasses.replace(cut, halt_at_step=0, resume=True), log=messages.append)
    assert "from step 4" in messages[0]
    assert losses(base, "cut") == reference[1]  # step for step, bit for bit on CPU
    assert json.loads((base_path(base, "cut") / "summary.json").read_text())["steps"] == 6


def base_path(cfg, name):
    from pathlib import Path

    return Path(cfg.root) / cfg.experiment / name


def test_four_devices_match_one_device(base, reference, n_devices):
    assert jax.device_count() >= n_devices
    train(dataclasses.replace(base, name="dev4", n_devices=n_devices, eval_batches=0))
    four, one = losses(base, "dev4"), reference[1]
    np.testing.assert_allclose([four[s] for s in one], list(one.values()), rtol=2e-5)


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(base, reference):
    cfg = dataclasses.replace(base, name="nan", optim=OptimConfig(lr=1e30), ckpt_every=1)
    with pytest.raises(NonFiniteLossError, match=r"at step 2; training stopped") as err:
        train(cfg)
    assert "Last good checkpoint: step 1" in str(err.value)
    ckpt = base_path(base, "nan") / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir()) == ["1"]
    assert not (base_path(base, "nan") / "summary.json").exists()


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(batch_size=6, grad_accum=4), "not divisible by grad_accum=4"),
        (dict(batch_size=6, n_devices=4), "not divisible by the 4 devices"),
        (dict(seq_len=17), "exceeds the model context 16"),
        (dict(noise_steps=(99,)), "noise_steps [99] outside"),
    ],
)
def test_bad_configs_are_rejected(base, change, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        train(dataclasses.replace(base, name="bad", **change))


@pytest.mark.slow
def test_fsdp_and_grad_accum_match_reference(base, reference, n_devices):
    cfg = dataclasses.replace(base, name="fsdp", n_devices=n_devices, fsdp=True, grad_accum=2)
    train(cfg)
    got, one = losses(base, "fsdp"), reference[1]
    np.testing.assert_allclose([got[s] for s in one], list(one.values()), rtol=1e-4)


@pytest.mark.slow
def test_noise_density_mode_logs_phi(base):
    cfg = dataclasses.replace(
        base, name="noise", noise_steps=(0, 4), noise_samples=6, optim=OptimConfig(name="sign_sgd")
    )
    train(cfg)
    rows = [r for r in load_metrics(base_path(base, "noise")) if "phi" in r]
    assert [r["step"] for r in rows] == [0, 4]
    for r in rows:
        assert 1 / 30_000 < r["phi"] <= 1
        for g in ("embedding", "attention", "mlp", "gains_biases"):
            assert 0 < r[f"phi/{g}"] <= 1
