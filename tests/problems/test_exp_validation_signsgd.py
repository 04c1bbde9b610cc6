"""Every config value of the signsgd family is checked before the run folder exists.

Each row parses a command line as a user types it (``[smoke] --field value``) and expects the
experiment's ``validate`` to refuse it with a ``ValueError`` naming the field; the presets
themselves pass. The tools' ``--help`` starts with what the tool does and an example command.
"""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geomopt.experiment import parse
from geomopt.lm import exp_pretrain, exp_pretrain_demo
from geomopt.lm._data import write_shard
from geomopt.problems import exp_matrix_noise, exp_sparse_noise, exp_toy

ROOT = Path(__file__).resolve().parents[2]
TOY = exp_toy.EXPERIMENT
SPARSE = exp_sparse_noise.EXPERIMENT
MATRIX = exp_matrix_noise.EXPERIMENT
PRETRAIN = exp_pretrain.EXPERIMENT
DEMO = exp_pretrain_demo.EXPERIMENT
FAMILY = (TOY, SPARSE, MATRIX, PRETRAIN, DEMO)
WSD_TOO_LONG = "--optim.schedule wsd --optim.warmup-frac 0.5 --optim.decay-frac 0.6"
MISSING_SHARDS = "--data.source shards --data.train /nonexistent/t_*.bin --data.val /nonexistent/v"

BAD = [
    # signsgd/toy
    (TOY, ["--det-lrs"], "det_lrs"),  # the flag given without values
    (TOY, ["--det-lrs", "1e-3", "-1e-3"], "det_lrs"),
    (TOY, ["--det-d", "0"], "det_d"),
    (TOY, ["--noise-d", "-3"], "noise_d"),
    (TOY, ["--n-seeds", "0"], "n_seeds"),
    (TOY, ["--steps", "1"], "steps"),
    (TOY, ["--log-every", "0"], "log_every"),
    (TOY, ["--seed", "-1"], "seed"),
    (TOY, ["--stiff-L", "0"], "stiff_L"),
    (TOY, ["--noise-std", "nan"], "noise_std"),
    (TOY, ["--noisy-lrs", "inf", "0.01"], "noisy_lrs"),
    (TOY, ["--noisy-lrs", "0.01", "-0.01"], "noisy_lrs"),
    (TOY, ["--noisy-lrs", "0.01"], "one step size per method"),
    (TOY, ["--methods", "sgd", "sgd"], "distinct"),
    (TOY, ["--methods", "sgd", "adam"], "methods"),
    # signsgd/sparse_noise
    (SPARSE, ["--dims"], "dims"),
    (SPARSE, ["--dims", "10", "0"], "dims"),
    (SPARSE, ["--phi-d", "0"], "phi_d"),
    (SPARSE, ["--phi-points", "0"], "phi_points"),
    (SPARSE, ["--n-seeds", "0"], "n_seeds"),
    (SPARSE, ["--levels", "0"], "levels"),
    (SPARSE, ["--max-steps", "0"], "max_steps"),
    (SPARSE, ["--per-decade", "0"], "per_decade"),
    (SPARSE, ["--full-max-d", "-1"], "full_max_d"),
    (SPARSE, ["--seed", "-1"], "seed"),
    (SPARSE, ["--sigma-l1", "0"], "sigma_l1"),
    (SPARSE, ["--eps", "-0.2"], "eps"),
    (SPARSE, ["--l-inf", "inf"], "l_inf"),
    (SPARSE, ["--delta", "nan"], "delta"),
    (SPARSE, ["--sgd-grid"], "sgd_grid"),
    (SPARSE, ["--sign-grid", "0.1", "0"], "sign_grid"),
    (SPARSE, ["--optimizers"], "optimizers"),
    (SPARSE, ["--optimizers", "sgd", "sgd"], "optimizers"),
    (SPARSE, ["--optimizers", "sgd", "adam"], "optimizers"),
    (SPARSE, ["--df", "2"], "df"),
    (SPARSE, ["--df", "inf"], "df"),
    # signsgd/matrix_noise
    (MATRIX, ["--sizes"], "sizes"),
    (MATRIX, ["--sizes", "4", "0"], "sizes"),
    (MATRIX, ["--ranks"], "ranks"),
    (MATRIX, ["--ranks", "1", "16"], "ranks"),  # above rank_n = 8
    (MATRIX, ["--rank-n", "0"], "rank_n"),
    (MATRIX, ["--n-seeds", "0"], "n_seeds"),
    (MATRIX, ["--max-steps", "-5"], "max_steps"),
    (MATRIX, ["--per-decade", "0"], "per_decade"),
    (MATRIX, ["--seed", "-2"], "seed"),
    (MATRIX, ["--trace-norm", "0"], "trace_norm"),
    (MATRIX, ["--eps", "nan"], "eps"),
    (MATRIX, ["--sgd-grid", "-1"], "sgd_grid"),
    (MATRIX, ["--sign-grid"], "sign_grid"),
    (MATRIX, ["--optimizers"], "optimizers"),
    (MATRIX, ["--optimizers", "muon_ns", "muon_ns"], "optimizers"),
    (MATRIX, ["--optimizers", "adam"], "optimizers"),
    # signsgd/pretrain: nested optimiser fields
    (PRETRAIN, ["--optim.lr", "-1"], "optim.lr"),  # the user report
    (PRETRAIN, ["--optim.lr", "nan"], "optim.lr"),
    (PRETRAIN, ["--optim.adam-lr", "0"], "optim.adam_lr"),
    (PRETRAIN, ["--optim.weight-decay", "-0.1"], "optim.weight_decay"),
    (PRETRAIN, ["--optim.momentum", "1"], "optim.momentum"),
    (PRETRAIN, ["--optim.b1", "-0.1"], "optim.b1"),
    (PRETRAIN, ["--optim.b2", "1.5"], "optim.b2"),
    (PRETRAIN, ["--optim.warmup-frac", "1.5"], "optim.warmup_frac"),
    (PRETRAIN, ["--optim.decay-frac", "-0.1"], "optim.decay_frac"),
    (PRETRAIN, WSD_TOO_LONG.split(), "optim.warmup_frac"),
    (PRETRAIN, ["--optim.clip", "-1"], "optim.clip"),
    # signsgd/pretrain: data and model
    (PRETRAIN, ["--data.offline-bytes", "0"], "data.offline_bytes"),
    (PRETRAIN, ["--data.source", "shards"], "data.train"),
    (PRETRAIN, MISSING_SHARDS.split(), "data.train"),
    (PRETRAIN, ["--model.vocab-size", "100"], "model.vocab_size"),
    # signsgd/pretrain: the run
    (PRETRAIN, ["--steps", "0"], "steps"),
    (PRETRAIN, ["--batch-size", "0"], "batch_size"),
    (PRETRAIN, ["--grad-accum", "3"], "grad_accum"),
    (PRETRAIN, ["--seq-len", "-1"], "seq_len"),
    (PRETRAIN, ["--seq-len", "64"], "seq_len"),  # above the context 32
    (PRETRAIN, ["--seed", "-1"], "seed"),
    (PRETRAIN, ["--eval-every", "-1"], "eval_every"),
    (PRETRAIN, ["--eval-batches", "-1"], "eval_batches"),
    (PRETRAIN, ["--eval-batch-size", "-1"], "eval_batch_size"),
    (PRETRAIN, ["--log-every", "0"], "log_every"),
    (PRETRAIN, ["--ckpt-every", "-1"], "ckpt_every"),
    (PRETRAIN, ["--ckpt-keep", "0"], "ckpt_keep"),
    (PRETRAIN, ["--noise-every", "-2"], "noise_every"),
    (PRETRAIN, ["--noise-every", "3", "--noise-samples", "1"], "noise_samples"),
    (PRETRAIN, ["--noise-batch-size", "-1"], "noise_batch_size"),
    (PRETRAIN, ["--n-devices", "-1"], "n_devices"),
    (PRETRAIN, ["--n-devices", "100000"], "n_devices"),
    (PRETRAIN, ["--peak-flops", "-1"], "peak_flops"),
    (PRETRAIN, ["--peak-flops", "inf"], "peak_flops"),
    (PRETRAIN, ["--hellaswag", "/nonexistent/hellaswag.jsonl"], "hellaswag"),
    (PRETRAIN, ["--hellaswag-every", "-1"], "hellaswag_every"),
    (PRETRAIN, ["--hellaswag-examples", "-1"], "hellaswag_examples"),
    # signsgd/pretrain_demo
    (DEMO, ["--optimizers", "--lrs"], "optimizers"),
    (DEMO, ["--optimizers", "sgd", "sgd", "--lrs", "0.1", "0.2"], "optimizers"),
    (DEMO, ["--lrs", "0.1"], "lrs"),  # smoke has two optimisers
    (DEMO, ["--lrs", "0.1", "-1e-3"], "lrs"),
    (DEMO, ["--lrs", "0.1", "inf"], "lrs"),
    (DEMO, ["--lr-factors"], "lr_factors"),
    (DEMO, ["--lr-factors", "1", "0"], "lr_factors"),
    (DEMO, ["--batch-size", "0"], "batch_size"),
    (DEMO, ["--steps", "0"], "steps"),
    (DEMO, ["--eval-every", "-1"], "eval_every"),
    (DEMO, ["--eval-batches", "0"], "eval_batches"),  # the headline is a validation loss
    (DEMO, ["--log-every", "0"], "log_every"),
    (DEMO, ["--noise-every", "-1"], "noise_every"),
    (DEMO, ["--noise-samples", "1"], "noise_samples"),
    (DEMO, ["--noise-batch-size", "-1"], "noise_batch_size"),
    (DEMO, ["--seed", "-1"], "seed"),
    (DEMO, ["--model.vocab-size", "100"], "model.vocab_size"),
    (DEMO, ["--data.offline-bytes", "0"], "data.offline_bytes"),
]


@pytest.mark.parametrize(
    "exp, argv, field", BAD, ids=[f"{e.name}:{' '.join(a)}" for e, a, _ in BAD]
)
def test_bad_value_is_refused_naming_the_field(exp, argv, field):
    _, cfg, _ = parse(exp, ["smoke", *argv])
    with pytest.raises(ValueError) as err:
        exp.validate(cfg)
    message = str(err.value)
    assert re.search(rf"(?<![\w.]){re.escape(field)}\b", message), message
    assert "\n" not in message


@pytest.mark.parametrize("exp", FAMILY, ids=[e.name for e in FAMILY])
def test_presets_pass_validation(exp):
    for cfg in exp.presets.values():
        if exp is PRETRAIN and cfg.data.source == "shards":
            continue  # need prepared token files; see the next test
        exp.validate(cfg)


def test_shard_presets_are_refused_until_the_shards_exist(tmp_path):
    for name in ("paper", "paper_sgd", "paper_noise", "speedrun"):
        cfg = PRETRAIN.presets[name]
        with pytest.raises(ValueError, match=r"data\.train=.*no token file matches"):
            PRETRAIN.validate(cfg)
    for split in ("train", "val"):
        write_shard(tmp_path / f"s_{split}_000000.bin", np.zeros(1024, np.uint16))
    data = dataclasses.replace(
        PRETRAIN.presets["paper"].data,
        train=str(tmp_path / "s_train_*.bin"),
        val=str(tmp_path / "s_val_*.bin"),
    )
    cfg = dataclasses.replace(PRETRAIN.presets["paper"], data=data, n_devices=1, batch_size=8,
                              grad_accum=1)  # fmt: skip
    PRETRAIN.validate(cfg)


def test_model_shape_is_refused_while_parsing(capsys):
    """GPT2Config checks itself on construction, so tyro refuses a bad shape at parse time."""
    with pytest.raises(SystemExit):
        parse(PRETRAIN, ["smoke", "--model.n-head", "5"])
    assert "n_head=5" in capsys.readouterr().err


def test_seed_count_is_n_seeds_everywhere():
    for exp in (TOY, SPARSE, MATRIX):
        fields = {f.name for f in dataclasses.fields(exp.config_type)}
        assert "n_seeds" in fields and not {"seeds", "runs"} & fields, exp.name


RST = re.compile(r"``|:(func|class|meth|mod|attr):")


def _help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    out = subprocess.run([sys.executable, *args, "--help"], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("tool", ["sample", "hellaswag", "prepare_data"])
def test_tool_help_starts_with_a_description_and_an_example(tool):
    text = _help(f"experiments/signsgd/{tool}.py")
    blocks = [b.strip() for b in text.split("\n\n") if b.strip()]
    assert blocks[0].startswith("usage:")
    description = blocks[1]
    assert len(description.split()) >= 20 and "A tool, not an experiment" in description
    example = blocks[2].splitlines()
    assert example[0] == "Examples:"
    assert any(ln.strip().startswith(f"uv run experiments/signsgd/{tool}.py") or
               f" experiments/signsgd/{tool}.py " in ln for ln in example[1:])  # fmt: skip
    assert not RST.search(text), RST.search(text)


@pytest.mark.parametrize("exp", FAMILY, ids=[e.name for e in FAMILY])
def test_experiment_help_has_no_rst_markup(exp, capsys):
    with pytest.raises(SystemExit):
        parse(exp, ["smoke", "--help"])
    text = capsys.readouterr().out
    assert "--seed" in text
    assert not RST.search(text), RST.search(text)
