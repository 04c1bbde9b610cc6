"""Pretraining on the experiment runner: folder layout and headline, resume after an
interruption equals the uninterrupted run, the runner's refusal rules, one compilation per
sweep, N devices equal one, console line and sinks (TensorBoard, W&B), MFU's peak, multi-host
checkpoint rules, non-finite loss, bad configs."""

import dataclasses
import json
import math
import struct
import sys
import types

import jax
import numpy as np
import pytest

from geomopt.experiment import (
    RunExistsError,
    execute,
    load_metrics,
    plot_run,
    staging_folder,
    to_jsonable,
)
from geomopt.lm import _checkpoints, _config_checks, _metrics, _train
from geomopt.lm._config import DataConfig, GPT2Config, OptimConfig, TrainConfig
from geomopt.lm.exp_pretrain import EXPERIMENT, HEADLINE_KEYS, PRESETS

MODEL = GPT2Config(vocab_size=256, n_layer=1, n_head=2, d_model=32, context=16)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("lm")


@pytest.fixture(scope="module")
def base(out):
    return TrainConfig(
        model=MODEL,
        optim=OptimConfig(algorithm="adamw", lr=1e-2),
        data=DataConfig(offline_dir=str(out / "corpus"), offline_bytes=200_000),
        batch_size=8,
        steps=6,
        eval_every=3,
        eval_batches=2,
        log_every=3,
        ckpt_every=2,
        noise_every=3,
        noise_samples=3,
        n_devices=1,
    )


def go(cfg, out, name, **kw):
    return execute(EXPERIMENT, cfg, preset="smoke", out=out, name=name, **kw)


def folder(out, name):
    return out / "signsgd" / "pretrain" / name


def unfinished(out, name):
    """Where the runner keeps an unfinished run until it finishes (and resumes it from)."""
    return staging_folder(folder(out, name))


def losses(out, name, path=None):
    rows = load_metrics(path or folder(out, name))
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


@pytest.fixture(scope="module")
def reference(base, out):
    return go(base, out, "full")


def test_layout_headline_metrics_and_figure(reference, out):
    path = reference.path
    assert reference.status == "ran" and path == folder(out, "full")
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "metrics.jsonl", "summary.json", "checkpoints", "tensorboard"} <= names
    assert sorted(p.name for p in (path / "checkpoints").iterdir()) == ["4", "6"]  # keep 2
    # no MFU on a CPU: it has no known peak (n/a, not a number)
    assert set(reference.headline) == {
        k for k in HEADLINE_KEYS if "hellaswag" not in k and k not in ("mfu", "max_attn_logit")
    }  # no MFU on a CPU, no attention logits without QK-clip
    assert reference.headline["tokens"] == 6 * 8 * 16
    assert all(math.isfinite(v) for v in reference.headline.values()), reference.headline
    curve = losses(out, "full")
    assert sorted(curve) == list(range(1, 7))
    assert curve[1] == pytest.approx(np.log(256), abs=0.1)
    assert curve[6] < curve[1] - 0.3  # adamw on bytes: the loss drops quickly from log(256)
    rows = load_metrics(path)
    assert [r["step"] for r in rows if "val_loss" in r] == [0, 3, 6]
    assert [r["step"] for r in rows if "phi" in r] == [0, 3, 6]
    assert all(1 / 30_000 < r["phi"] <= 1 for r in rows if "phi" in r)
    timed = [r for r in rows if "tokens_per_s" in r]
    assert [r["step"] for r in timed] == [3, 6]
    assert all(r["tokens_per_s"] > 0 and "mfu" not in r for r in timed)  # no CPU peak: n/a
    summary = json.loads((path / "summary.json").read_text())
    assert summary["details"]["peak_flops"]["run"] == {
        "flops": None,
        "source": "no known peak for cpu: MFU n/a (set --peak-flops)",
    }
    figures = plot_run(EXPERIMENT, path, out / "figures")
    assert [f.name for f in figures] == ["pretrain_loss_full.png"] and figures[0].exists()


def _tensorboard_tags(logdir):
    """Scalar tags in the TFRecord event files under ``logdir`` (length, crc, data, crc)."""
    from tensorboardX.proto import event_pb2

    tags = set()
    for f in logdir.rglob("events.out.tfevents.*"):
        raw = f.read_bytes()
        i = 0
        while i < len(raw):
            (n,) = struct.unpack("<Q", raw[i : i + 8])
            event = event_pb2.Event.FromString(raw[i + 12 : i + 12 + n])
            tags.update(v.tag for v in event.summary.value)
            i += 12 + n + 4
    return tags


def test_tensorboard_event_files_hold_the_metrics(reference):
    tags = _tensorboard_tags(reference.path / "tensorboard")
    assert {"loss", "lr", "val_loss", "phi", "tokens_per_s"} <= tags and "mfu" not in tags


def test_resume_after_interruption_equals_uninterrupted(base, reference, out, monkeypatch):
    save = _train.Checkpoints.save

    def killed_at_6(self, step, params, opt_state):
        if step == 6:  # a save killed half-way leaves orbax's temporary folder behind
            partial = self.path / "6.orbax-checkpoint-tmp-1733130000"
            (partial / "params").mkdir(parents=True)
            (partial / "params" / "_METADATA").write_text("{")
            raise KeyboardInterrupt
        save(self, step, params, opt_state)

    monkeypatch.setattr(_train.Checkpoints, "save", killed_at_6)
    with pytest.raises(KeyboardInterrupt):
        go(base, out, "cut")
    assert not folder(out, "cut").exists()
    assert not (unfinished(out, "cut") / "summary.json").exists()
    assert max(losses(out, "cut", unfinished(out, "cut"))) == 6  # rows after checkpoint 4 written
    before = load_metrics(unfinished(out, "cut"))
    restored, saved = [], []
    restore = _train.Checkpoints.restore

    def recording_restore(self, step, params, opt_state):
        restored.append(step)
        return restore(self, step, params, opt_state)

    def recording_save(self, step, params, opt_state):
        saved.append(step)
        save(self, step, params, opt_state)

    monkeypatch.setattr(_train.Checkpoints, "restore", recording_restore)
    monkeypatch.setattr(_train.Checkpoints, "save", recording_save)
    resumed = go(base, out, "cut")
    assert resumed.status == "resumed"
    # it restarted from checkpoint 4 and ran steps 5 and 6 only
    assert restored == [4] and saved == [6]
    rows = load_metrics(folder(out, "cut"))
    steps = [r["step"] for r in rows if "loss" in r]
    assert steps == sorted(set(steps))  # the interrupted rows 5, 6 were dropped, not doubled
    # rows up to the checkpoint are the interrupted run's, untouched (step 3's measured
    # tokens_per_s included, which a rerun from step 0 would measure anew)
    early = [r for r in before if r["step"] <= 4]
    assert any("tokens_per_s" in r for r in early)
    assert [r for r in rows if r["step"] <= 4] == early
    assert losses(out, "cut") == losses(out, "full")  # step for step, bit for bit on CPU
    assert resumed.headline["final_val_loss"] == reference.headline["final_val_loss"]


def _kill_at(step, monkeypatch):
    save = _train.Checkpoints.save

    def killed(self, s, params, opt_state):
        if s == step:
            raise KeyboardInterrupt
        save(self, s, params, opt_state)

    monkeypatch.setattr(_train.Checkpoints, "save", killed)


def test_damaged_latest_checkpoint_resumes_from_the_one_before(
    base, reference, out, monkeypatch, capsys
):
    cfg = dataclasses.replace(base, ckpt_keep=3)
    _kill_at(6, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        go(cfg, out, "damaged")
    monkeypatch.undo()
    ckpt = unfinished(out, "damaged") / "checkpoints"
    assert sorted(p.name for p in ckpt.iterdir()) == ["2", "4"]
    data = max((f for f in (ckpt / "4").rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte: orbax alone restores it without a word
    data.write_bytes(bytes(raw))
    capsys.readouterr()
    resumed = go(cfg, out, "damaged")
    console = capsys.readouterr().err
    assert f"checkpoint step 4 in {ckpt} is damaged (" in console
    assert "resumed" in console and "from the checkpoint of step 2" in console
    assert (folder(out, "damaged") / "checkpoints.damaged" / "4").is_dir()
    assert losses(out, "damaged") == losses(out, "full")
    assert resumed.headline["final_val_loss"] == reference.headline["final_val_loss"]


def test_full_disk_stops_the_run_and_the_same_command_resumes(base, reference, out, monkeypatch):
    from geomopt.lm import _checkpoints

    write = _checkpoints.write_manifest

    def full_at_4(folder):
        if folder.name == "4":
            raise OSError(28, "No space left on device")
        return write(folder)

    monkeypatch.setattr(_checkpoints, "write_manifest", full_at_4)
    with pytest.raises(_checkpoints.CheckpointWriteError, match="checkpoint 2 is intact"):
        go(base, out, "full_disk")
    monkeypatch.undo()
    ckpt = unfinished(out, "full_disk") / "checkpoints"
    assert [p.name for p in ckpt.iterdir()] == ["2"]
    assert _checkpoints.check_manifest(ckpt / "2") is None
    resumed = go(base, out, "full_disk")
    assert resumed.status == "resumed"
    assert losses(out, "full_disk") == losses(out, "full")
    assert resumed.headline["final_val_loss"] == reference.headline["final_val_loss"]


def test_runner_refusals_and_overwrite(base, reference, out):
    with pytest.raises(RunExistsError, match="finished run"):
        go(base, out, "full")
    unfinished = folder(out, "half")
    unfinished.mkdir(parents=True)
    (unfinished / "config.json").write_text(json.dumps({"config": to_jsonable(base)}))
    with pytest.raises(RunExistsError, match="steps differ"):
        go(dataclasses.replace(base, steps=5), out, "half")
    ckpt = reference.path / "checkpoints"
    stale = ckpt / "4" / "marker"
    stale.write_text("x")
    again = go(base, out, "full", overwrite=True)
    assert again.status == "ran" and not stale.exists()  # only --overwrite deletes checkpoints
    assert again.headline["final_val_loss"] == reference.headline["final_val_loss"]


def test_other_learning_rate_reuses_the_compiled_step(base, reference, out, compiles):
    with compiles() as log:
        go(dataclasses.replace(base, optim=OptimConfig(algorithm="adamw", lr=3e-3)), out, "lr2")
    assert log.count("train_step") == 0, log.names
    assert losses(out, "lr2")[1] == losses(out, "full")[1]  # same init and batch
    with compiles() as log:  # another optimiser is another program: the counter can fail
        go(dataclasses.replace(base, optim=OptimConfig(algorithm="sgd", lr=0.1)), out, "sgd")
    assert log.count("train_step") == 1, log.names


@pytest.mark.parametrize("devices, fsdp", [(4, False), (2, False), (2, True), (4, True)])
def test_data_parallel_and_fsdp_match_one_device(base, reference, out, n_devices, devices, fsdp):
    """Data-parallel and FSDP training over 2 and 4 virtual CPU devices (conftest) give the
    one-device losses; with FSDP the parameters are really split over the devices."""
    assert jax.device_count() >= devices <= n_devices
    cfg = dataclasses.replace(base, n_devices=devices, fsdp=fsdp, eval_batches=0, noise_every=0)
    name = f"dev{devices}{'fsdp' if fsdp else ''}"
    go(cfg, out, name)
    many, one = losses(out, name), losses(out, "full")
    np.testing.assert_allclose([many[s] for s in one], list(one.values()), rtol=2e-5)
    params = _train.Trainer.build(cfg).init()[0]
    split = [x for x in jax.tree.leaves(params) if len(x.sharding.device_set) == devices]
    shards = {x.addressable_shards[0].data.shape != x.shape for x in split}
    assert shards == ({True} if fsdp else {False}), shards


def test_hellaswag_during_training_in_metrics_and_console(base, out, capsys):
    hs = out / "hellaswag_tiny.jsonl"
    endings = ["return x", "pass", "x = 1", "yield x"]
    rows = [{"ctx": f"def f{i}(x):", "endings": endings, "label": i % 4} for i in range(3)]
    hs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = dataclasses.replace(
        base, hellaswag=str(hs), hellaswag_every=6, noise_every=0, eval_every=0, ckpt_every=0
    )
    outcome = go(cfg, out, "hellaswag")
    got = [r for r in load_metrics(outcome.path) if "hellaswag_acc" in r]
    assert [r["step"] for r in got] == [0, 6]
    for r in got:
        for k in ("hellaswag_acc", "hellaswag_acc_norm", "hellaswag_acc_token_norm"):
            assert r[k] in (0.0, 1 / 3, 2 / 3, 1.0)  # 3 examples
    assert outcome.headline["final_hellaswag_acc"] == got[-1]["hellaswag_acc"]
    assert "hellaswag_acc " in capsys.readouterr().err


def test_qk_clip_reads_the_logits_of_every_micro_batch_and_acts(base, out):
    """MuonClip through the trainer: the step reports the largest attention logit (the max
    over the grad_accum micro-batches), a threshold under it changes the run, and QK-clip
    chains after any algorithm."""
    quiet = dict(noise_every=0, eval_every=0, ckpt_every=0, tensorboard=False, grad_accum=2)
    muon = OptimConfig(algorithm="muon", lr=0.02, schedule="constant")
    runs = {}
    for name, ocfg in [
        ("mc-off", dataclasses.replace(muon, algorithm="muon_clip", qk_clip=1e6)),
        ("mc-on", dataclasses.replace(muon, algorithm="muon_clip", qk_clip=0.02)),
        ("muon", muon),
        ("adamw-clip", OptimConfig(algorithm="adamw", qk_clip=0.02)),
    ]:
        runs[name] = go(dataclasses.replace(base, optim=ocfg, **quiet), out, name)
    rows = [r for r in load_metrics(folder(out, "mc-off")) if "attn_logit_max" in r]
    assert len(rows) == base.steps and all(0 < r["attn_logit_max"] < 1e6 for r in rows)
    assert runs["mc-off"].headline["max_attn_logit"] == max(r["attn_logit_max"] for r in rows)
    assert max(r["attn_logit_max"] for r in rows) > 0.02  # so the threshold below acts
    np.testing.assert_allclose(list(losses(out, "mc-off").values()),
                               list(losses(out, "muon").values()), rtol=1e-5)  # fmt: skip
    assert "max_attn_logit" not in runs["muon"].headline
    logit = lambda name: [r["attn_logit_max"] for r in load_metrics(folder(out, name))  # noqa: E731
                          if "attn_logit_max" in r]  # fmt: skip
    on, off = logit("mc-on"), logit("mc-off")
    assert on[0] == pytest.approx(off[0], rel=1e-6)  # measured before the first clip
    assert all(a < 0.7 * b for a, b in zip(on[2:], off[2:], strict=True))  # clipped: smaller
    assert math.isfinite(runs["adamw-clip"].headline["max_attn_logit"])


def test_console_line_every_log_every(base, out, capsys):
    cfg = dataclasses.replace(base, noise_every=0, eval_every=0, ckpt_every=0, tensorboard=False)
    outcome = execute(EXPERIMENT, cfg, preset="smoke", out=out, name="console")
    figures = plot_run(EXPERIMENT, outcome.path, out / "figures")  # one panel: no phi
    assert [f.name for f in figures] == ["pretrain_loss_console.png"]
    err = capsys.readouterr().err
    assert "no known peak for cpu: MFU n/a (set --peak-flops)" in err
    lines = [ln for ln in err.splitlines() if "tok/s" in ln]
    assert len(lines) == 2, err  # steps 3 and 6; step 1 compiles and is not timed
    for ln in lines:
        assert "loss" in ln and "lr" in ln and "ETA" in ln and "MFU n/a" in ln
    assert "mfu" not in outcome.headline
    assert not (folder(out, "console") / "tensorboard").exists()


@pytest.mark.parametrize("peak, above", [(1e18, False), (1.0, True)])
def test_mfu_against_a_given_peak_says_when_above_100(base, out, capsys, peak, above):
    cfg = dataclasses.replace(base, noise_every=0, eval_every=0, ckpt_every=0, tensorboard=False,
                              peak_flops=peak, steps=3, log_every=3)  # fmt: skip
    outcome = execute(EXPERIMENT, cfg, preset="smoke", out=out, name=f"peak{peak:g}")
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "tok/s" in ln)
    mfu = float(line.split("MFU ")[1].split("%")[0])
    assert math.isclose(mfu, 100 * outcome.headline["mfu"], rel_tol=0.05, abs_tol=0.05)
    assert ("above 100 %" in line) == above and (mfu > 100) == above


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(base, out):
    cfg = dataclasses.replace(base, optim=OptimConfig(lr=1e30), ckpt_every=1, noise_every=0)
    with pytest.raises(_train.NonFiniteLossError, match=r"at step 2; training stopped") as err:
        go(cfg, out, "nan")
    assert "Last good checkpoint: step 1" in str(err.value)
    assert sorted(p.name for p in (unfinished(out, "nan") / "checkpoints").iterdir()) == ["1"]
    assert not folder(out, "nan").exists()
    assert not (unfinished(out, "nan") / "summary.json").exists()


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(batch_size=6, grad_accum=4), "not divisible by grad_accum=4"),
        (dict(seq_len=17), "exceeds the model context 16"),
        (dict(steps=0), "steps=0: expected an integer >= 1"),
        (dict(noise_every=-1), "noise_every=-1"),
        (dict(hellaswag="/nonexistent/hs.jsonl"), "no such file"),
    ],
)
def test_bad_configs_are_refused_before_a_folder_exists(base, out, change, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        go(dataclasses.replace(base, **change), out, "bad")
    assert not folder(out, "bad").exists()


@pytest.mark.parametrize(
    "cut, message",
    [
        (2, r"truncated, header says 400 tokens but the file holds 399"),
        (-2, r"token count mismatch, header says 400 tokens but the file holds 401"),
        (1, r"799 bytes after the header, not a whole uint16 count"),
    ],
    ids=["cut-mid-file", "count-disagrees", "half-token"],
)
def test_damaged_token_shards_are_named_before_a_folder_exists(base, out, tmp_path, cut, message):
    from geomopt.lm._data import write_shard

    good, bad = tmp_path / "val_000.bin", tmp_path / "train_000.bin"
    tokens = np.arange(400) % 256
    write_shard(good, tokens)
    write_shard(bad, tokens)
    raw = bad.read_bytes()
    bad.write_bytes(raw[:-cut] if cut > 0 else raw + b"\0" * -cut)
    cfg = dataclasses.replace(base, data=DataConfig(train=str(bad), val=str(good)))
    with pytest.raises(ValueError, match=f"data.train: shard {bad}: {message}"):
        go(cfg, out, "damaged_shard")
    assert not folder(out, "damaged_shard").exists()
    assert not unfinished(out, "damaged_shard").exists()


def test_device_divisibility_is_checked(base):
    with pytest.raises(ValueError, match="not divisible by the 4 devices"):
        _config_checks.check_train_config(dataclasses.replace(base, batch_size=6), 4)


def test_peak_flops_table_and_measured_fallback():
    def dev(kind, platform="gpu"):
        return types.SimpleNamespace(device_kind=kind, platform=platform)

    assert _metrics.device_peak_flops(device=dev("NVIDIA H100 80GB HBM3"))[0] == 989e12
    assert _metrics.device_peak_flops(device=dev("TPU v5 lite", "tpu"))[0] == 197e12
    assert _metrics.device_peak_flops(device=dev("TPU v5p", "tpu"))[0] == 459e12
    assert _metrics.device_peak_flops(5e12) == (5e12, "given by --peak-flops")
    assert _metrics.device_peak_flops(device=dev("NVIDIA H200"))[0] == 989e12
    assert _metrics.device_peak_flops(device=dev("NVIDIA A100-SXM4-80GB"))[0] == 312e12
    flops, source = _metrics.device_peak_flops(device=dev("Mystery accelerator"))
    assert math.isnan(flops) and "MFU n/a" in source
    flops, source = _metrics.device_peak_flops(device=dev("cpu", "cpu"))
    assert math.isnan(flops) and source.startswith("no known peak for cpu")


# --- Weights & Biases --------------------------------------------------------------------------


class _FakeRun:
    def __init__(self, path):
        self.path = path
        self.rows = []

    def log_rows(self, rows):
        self.rows.extend(rows)


def test_wandb_disabled_never_imports_it(base, tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    sinks = _metrics.MetricSinks(_FakeRun(tmp_path), dataclasses.replace(base, tensorboard=False))
    sinks.write([{"step": 1, "loss": 2.0}])
    sinks.close()
    assert "wandb" not in sys.modules and sinks.wandb is None


def test_wandb_enabled_but_not_installed_is_refused_by_name(base, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    cfg = dataclasses.replace(base, wandb=True, tensorboard=False)
    with pytest.raises(ValueError, match="wandb package is not installed.*uv pip install wandb"):
        _config_checks.check_train_config(cfg)
    with pytest.raises(ValueError, match="uv pip install wandb"):
        _metrics.MetricSinks(_FakeRun(tmp_path), cfg)


def test_wandb_enabled_logs_every_row(base, tmp_path, monkeypatch):
    calls = {"init": [], "log": [], "finish": 0}

    class FakeWandbRun:
        def log(self, values, step):
            calls["log"].append((step, values))

        def finish(self):
            calls["finish"] += 1

    def init(**kw):
        calls["init"].append(kw)
        return FakeWandbRun()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    cfg = dataclasses.replace(base, wandb=True, tensorboard=False)
    sinks = _metrics.MetricSinks(_FakeRun(tmp_path), cfg, tag={"optimizer": "sgd"})
    sinks.write([{"step": 3, "loss": 2.5, "tokens": 384}])
    sinks.close()
    assert calls["init"][0]["mode"] == "offline" and calls["init"][0]["dir"] == str(tmp_path)
    assert calls["log"] == [(3, {"loss": 2.5, "tokens": 384.0})] and calls["finish"] == 1


# --- multi-host checkpoint rules ---------------------------------------------------------------


@pytest.mark.parametrize("pid", [0, 1])
def test_only_process_zero_clears_checkpoints_between_barriers(tmp_path, pid):
    ckpt = tmp_path / "checkpoints"
    (ckpt / "4").mkdir(parents=True)
    events = []

    def barrier(name):
        events.append(("barrier", name, ckpt.exists()))

    _checkpoints.clear_checkpoint_dir(ckpt, process_index=lambda: pid, barrier=barrier)
    assert ckpt.exists() == (pid != 0)
    assert [e[0] for e in events] == ["barrier", "barrier"]
    assert events[0][2] is True  # nothing deleted before every host reached the first barrier
    assert events[1][2] is (pid != 0)


def test_every_host_must_restore_the_same_step():
    _checkpoints.check_restored_step(4, allgather=lambda s: np.array([s, s, s, s]))
    with pytest.raises(RuntimeError, match=r"different checkpoint steps \[4, 2\]"):
        _checkpoints.check_restored_step(4, allgather=lambda s: np.array([4, 2]))


# --- presets -----------------------------------------------------------------------------------


def test_paper_presets_follow_the_paper():
    paper, noise = PRESETS["paper"], PRESETS["paper_noise"]
    assert paper.model.activation == "gelu_exact" and paper.model.dtype == "bfloat16"
    assert (paper.seq_len, paper.batch_size, paper.steps) == (512, 512, 10_000)
    assert paper.optim.algorithm == "sign_sgd" and paper.optim.lr == 1e-4
    assert paper.noise_every == 0  # phi comes from the separate SGD run, as in the paper
    assert PRESETS["paper_sgd"].optim.algorithm == "sgd" and PRESETS["paper_sgd"].optim.lr == 1e-2
    assert noise.optim.algorithm == "sgd" and noise.optim.lr == 1e-2
    assert noise.optim.schedule == "cosine"
    assert round(noise.optim.warmup_frac * noise.steps) == 1000
    assert (noise.noise_every, noise.noise_samples) == (100, 512)
    for name in ("smoke", "quick"):
        _config_checks.check_train_config(PRESETS[name])


_EIGHT_DEVICES = """
import dataclasses, json, sys
import jax
from geomopt.lm._config import DataConfig, GPT2Config, OptimConfig, TrainConfig
from geomopt.lm._train import Trainer

assert jax.device_count() == 8, jax.devices()
cfg = TrainConfig(
    model=GPT2Config(vocab_size=256, n_layer=1, n_head=2, d_model=32, context=16),
    optim=OptimConfig(algorithm="adamw", lr=1e-2),
    data=DataConfig(offline_dir=sys.argv[1], offline_bytes=200_000),
    batch_size=8, steps=3, eval_batches=0, n_devices=1, tensorboard=False,
)
out = {}
for devices, fsdp in ((1, False), (8, False), (8, True)):
    trainer = Trainer.build(dataclasses.replace(cfg, n_devices=devices, fsdp=fsdp))
    params, opt_state = trainer.init()
    losses = []
    for step in range(cfg.steps):
        params, opt_state, m = trainer.step(params, opt_state, step)
        losses.append(float(m["loss"]))
    out[f"{devices}{'fsdp' if fsdp else ''}"] = losses
print(json.dumps(out))
"""


def test_eight_forced_host_devices_match_one_device(out):
    """8 devices from ``--xla_force_host_platform_device_count`` (set before JAX starts, so in
    a fresh process): data parallel and FSDP give the one-device losses."""
    import os
    import subprocess

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, "-c", _EIGHT_DEVICES, str(out / "corpus")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got["8"], got["1"], rtol=2e-5)
    np.testing.assert_allclose(got["8fsdp"], got["1"], rtol=2e-5)
