"""Every canon experiment refuses every bad config value before a run folder exists: one
``ValueError`` whose message starts with the field's name (nested ones with their prefix), as the
command line gives them (``parse`` of the ``smoke`` preset plus the bad flags). And ``--help``
shows the field docstrings without reStructuredText markup."""

import importlib
import re

import pytest

from geomopt.experiment import execute, parse

MODULES = ("covering", "curve_regularity", "stability", "classify", "modelnet", "rotations")

# One row per kind of bad value of every field: (experiment, bad flags, field named).
TRAIN_ROWS = [
    (["--train.epochs", "0"], "train.epochs"),
    (["--train.batch", "0"], "train.batch"),
    (["--train.model.mlp-dims"], "train.model.mlp_dims"),
    (["--train.model.mlp-dims", "16", "0"], "train.model.mlp_dims"),
    (["--train.model.n-bands", "0"], "train.model.n_bands"),
    (["--train.model.fourier-scale", "0"], "train.model.fourier_scale"),
    (["--train.model.fourier-scale", "nan"], "train.model.fourier_scale"),
    (["--train.model.dropout", "1.0"], "train.model.dropout"),
    (["--train.model.dropout", "-0.1"], "train.model.dropout"),
    (["--train.model.point-dropout", "1.5"], "train.model.point_dropout"),
    (["--train.model.input-dropout", "nan"], "train.model.input_dropout"),
    (["--train.model.label-smoothing", "1"], "train.model.label_smoothing"),
    (["--train.model.bits", "0"], "train.model.bits"),
    (["--train.model.bits", "33"], "train.model.bits"),
    (["--train.model.n-perms", "0"], "train.model.n_perms"),
    (["--train.model.deepsets-width", "0"], "train.model.deepsets_width"),
    (["--train.model.deepsets-depth", "-1"], "train.model.deepsets_depth"),
    (["--train.model.tf-dim", "0"], "train.model.tf_dim"),
    (["--train.model.tf-depth", "0"], "train.model.tf_depth"),
    (["--train.model.tf-heads", "0"], "train.model.tf_heads"),
    (["--train.model.tf-heads", "3"], "train.model.tf_heads"),  # does not divide tf_dim
    (["--train.model.tf-window", "0"], "train.model.tf_window"),
    (["--train.model.lr", "0"], "train.model.lr"),
    (["--train.model.lr", "inf"], "train.model.lr"),
    (["--train.model.weight-decay", "-0.01"], "train.model.weight_decay"),
]

ROWS = [
    ("covering", ["--dims"], "dims"),
    ("covering", ["--dims", "2", "2"], "dims"),
    ("covering", ["--dims", "0", "2"], "dims"),
    ("covering", ["--k", "0"], "k"),
    ("covering", ["--ks"], "ks"),
    ("covering", ["--ks", "0"], "ks"),
    ("covering", ["--k-dim", "0"], "k_dim"),
    ("covering", ["--n-train"], "n_train"),
    ("covering", ["--n-train", "0", "8"], "n_train"),
    ("covering", ["--n-train", "1", "8"], "n_train"),  # fewer than n_classes
    ("covering", ["--n-test", "0"], "n_test"),
    ("covering", ["--n-points", "0"], "n_points"),
    ("covering", ["--n-classes", "0"], "n_classes"),
    ("covering", ["--amplitude", "0"], "amplitude"),
    ("covering", ["--amplitude", "-0.1"], "amplitude"),
    ("covering", ["--amplitude", "nan"], "amplitude"),
    ("covering", ["--amplitude", "inf"], "amplitude"),
    ("covering", ["--bits", "0"], "bits"),
    ("covering", ["--bits", "33"], "bits"),
    ("covering", ["--seed", "-1"], "seed"),
    ("covering", ["--modelnet-points", "0"], "modelnet_points"),
    ("covering", ["--modelnet-max-test", "-1"], "modelnet_max_test"),
    ("covering", ["--modelnet-max-train", "-1"], "modelnet_max_train"),
    ("covering", ["--modelnet-dir", "/nonexistent/modelnet"], "modelnet_dir"),
    ("curve_regularity", ["--dims"], "dims"),
    ("curve_regularity", ["--dims", "1", "2"], "dims"),
    ("curve_regularity", ["--dims", "3", "3"], "dims"),
    ("curve_regularity", ["--curves"], "curves"),
    ("curve_regularity", ["--curves", "peano"], "curves"),
    ("curve_regularity", ["--curves", "hilbert", "hilbert"], "curves"),
    ("curve_regularity", ["--index-bits", "0"], "index_bits"),
    ("curve_regularity", ["--index-bits", "5"], "index_bits"),  # 2 bits per axis at d = 2
    ("curve_regularity", ["--max-bits", "2"], "max_bits"),
    ("curve_regularity", ["--max-bits", "33"], "max_bits"),
    ("curve_regularity", ["--n-pairs", "0"], "n_pairs"),
    ("curve_regularity", ["--scale-step", "0"], "scale_step"),
    ("curve_regularity", ["--scale-step", "40"], "scale_step"),  # < 2 scales to fit
    ("curve_regularity", ["--seed", "-1"], "seed"),
    ("stability", ["--orders"], "orders"),
    ("stability", ["--orders", "peano"], "orders"),
    ("stability", ["--dims"], "dims"),
    ("stability", ["--dims", "0"], "dims"),
    ("stability", ["--eps"], "eps"),
    ("stability", ["--eps", "0"], "eps"),
    ("stability", ["--eps", "1e-3", "-1e-3"], "eps"),
    ("stability", ["--eps", "nan"], "eps"),
    ("stability", ["--eps", "inf"], "eps"),
    ("stability", ["--eps", "1e-3", "1e-3"], "eps"),
    ("stability", ["--n-clouds", "0"], "n_clouds"),
    ("stability", ["--n-points", "1"], "n_points"),
    ("stability", ["--n-perturb", "0"], "n_perturb"),
    ("stability", ["--bits", "0"], "bits"),
    ("stability", ["--bits", "33"], "bits"),
    ("stability", ["--max-ratio-clouds", "-1"], "max_ratio_clouds"),
    ("stability", ["--saturate", "0"], "saturate"),
    ("stability", ["--saturate", "1.5"], "saturate"),
    ("stability", ["--saturate", "nan"], "saturate"),
    ("stability", ["--seed", "-1"], "seed"),
    ("classify", ["--kinds"], "kinds"),
    ("classify", ["--kinds", "pointnet"], "kinds"),
    ("classify", ["--dims"], "dims"),
    ("classify", ["--dims", "0", "2"], "dims"),
    ("classify", ["--strides"], "strides"),
    ("classify", ["--strides", "0"], "strides"),
    ("classify", ["--k", "0"], "k"),
    ("classify", ["--n-train", "0"], "n_train"),
    ("classify", ["--n-train", "8"], "n_train"),  # stride 2 leaves fewer than one batch of 8
    ("classify", ["--n-test", "0"], "n_test"),
    ("classify", ["--n-points", "0"], "n_points"),
    ("classify", ["--n-classes", "1"], "n_classes"),
    ("classify", ["--deform", "-0.1"], "deform"),
    ("classify", ["--deform", "nan"], "deform"),
    ("classify", ["--noise", "inf"], "noise"),
    ("classify", ["--base-dim", "-1"], "base_dim"),
    ("classify", ["--base-dim", "3"], "base_dim"),  # above the smallest d
    ("classify", ["--n-seeds", "0"], "n_seeds"),
    ("classify", ["--data-seed", "-1"], "data_seed"),
    (
        "classify",
        ["--kinds", "transformer_lex", "--train.model.tf-window", "3"],
        "train.model.tf_window",
    ),  # fmt: skip
    *[("classify", argv, field) for argv, field in TRAIN_ROWS],
    ("modelnet", ["--kinds"], "kinds"),
    ("modelnet", ["--kinds", "lex", "lex"], "kinds"),
    ("modelnet", ["--strides"], "strides"),
    ("modelnet", ["--strides", "0"], "strides"),
    ("modelnet", ["--n-points", "0"], "n_points"),
    ("modelnet", ["--n-seeds", "0"], "n_seeds"),
    ("modelnet", ["--demo-clouds", "32", "0"], "demo_clouds"),
    ("modelnet", ["--demo-clouds", "8", "16"], "demo_clouds"),  # fewer than a batch at stride 2
    ("modelnet", ["--demo-classes", "1"], "demo_classes"),
    ("modelnet", ["--no-demo", "--data-root", "/nonexistent/modelnet"], "data_root"),
    (
        "modelnet",
        ["--kinds", "transformer_hilbert", "--train.model.tf-window", "3"],
        "train.model.tf_window",
    ),  # fmt: skip
    ("modelnet", ["--train.epochs", "0"], "train.epochs"),
    ("modelnet", ["--train.model.lr", "nan"], "train.model.lr"),
    ("modelnet", ["--train.model.dropout", "1"], "train.model.dropout"),
    ("rotations", ["--canons"], "canons"),
    ("rotations", ["--canons", "qr"], "canons"),
    ("rotations", ["--dims"], "dims"),
    ("rotations", ["--dims", "1"], "dims"),
    ("rotations", ["--dims", "9"], "dims"),
    ("rotations", ["--k", "0"], "k"),
    ("rotations", ["--n-train", "0"], "n_train"),
    ("rotations", ["--n-train", "4"], "n_train"),  # fewer than one batch of 8
    ("rotations", ["--n-test", "0"], "n_test"),
    ("rotations", ["--n-points", "0"], "n_points"),
    ("rotations", ["--n-classes", "1"], "n_classes"),
    ("rotations", ["--n-seeds", "0"], "n_seeds"),
    ("rotations", ["--cover-clouds", "0", "2"], "cover_clouds"),
    ("rotations", ["--cover-clouds", "32", "2"], "cover_clouds"),  # more than n_train
    ("rotations", ["--cover-clouds", "1", "2"], "cover_clouds"),  # fewer than n_classes
    ("rotations", ["--data-seed", "-1"], "data_seed"),
    ("rotations", ["--data-root", "/nonexistent/modelnet"], "data_root"),
    ("rotations", ["--data-root", "/nonexistent/modelnet", "--dims", "2"], "dims"),
    ("rotations", ["--train.batch", "0"], "train.batch"),
    ("rotations", ["--train.model.weight-decay", "nan"], "train.model.weight_decay"),
    ("rotations", ["--train.model.dropout", "-1"], "train.model.dropout"),
]


def _exp(name):
    return importlib.import_module(f"geomopt.canon.exp_{name}").EXPERIMENT


@pytest.mark.parametrize(("name", "argv", "field"), ROWS, ids=lambda v: " ".join(v) if
                         isinstance(v, list) else v)  # fmt: skip
def test_bad_value_is_refused_naming_the_field(name, argv, field):
    exp = _exp(name)
    _, cfg, _ = parse(exp, ["smoke", *argv])
    with pytest.raises(ValueError, match=rf"^{re.escape(field)}=.*expected") as info:
        exp.validate(cfg)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", MODULES)
def test_every_preset_validates(name):
    exp = _exp(name)
    for cfg in exp.presets.values():
        if name == "modelnet" and not cfg.demo:
            continue  # needs the ModelNet files (tested below with small ones)
        exp.validate(cfg)


@pytest.mark.parametrize("name", MODULES)
def test_bad_value_leaves_no_folder(tmp_path, name):
    exp = _exp(name)
    flag = "--seed" if name in ("covering", "curve_regularity", "stability") else "--n-seeds"
    _, cfg, _ = parse(exp, ["smoke", flag, "-1"])
    with pytest.raises(ValueError):
        execute(exp, cfg, preset="smoke", out=tmp_path)
    assert not any(tmp_path.iterdir())


def _shards(folder, n_train=4, n_points=64):
    import h5py
    import numpy as np

    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("test", 2)):
        with h5py.File(folder / f"ply_data_{split}0.h5", "w") as f:
            f["data"] = np.zeros((n, n_points, 3), np.float32)
            f["label"] = np.zeros((n, 1), np.uint8)
    return folder


def test_modelnet_point_count_and_size_are_checked_from_the_files(tmp_path):
    root = _shards(tmp_path / "data" / "modelnet10_ply_hdf5_2048")
    cov = _exp("covering")
    base = ["--modelnet-dir", str(root), "--modelnet-dataset", "modelnet10"]
    _, cfg, _ = parse(cov, ["smoke", *base, "--modelnet-points", "65"])
    with pytest.raises(ValueError, match=r"^modelnet_points=65: expected at most the 64 points"):
        cov.validate(cfg)
    _, cfg, _ = parse(cov, ["smoke", *base, "--modelnet-points", "64"])
    cov.validate(cfg)
    mn = _exp("modelnet")
    flags = ["--no-demo", "--data-root", str(tmp_path / "data"), "--n-points", "16"]
    _, cfg, _ = parse(mn, ["smoke", *flags])
    with pytest.raises(ValueError, match=r"^data_root=.*4 training clouds at stride 2"):
        mn.validate(cfg)  # 4 clouds, every 2nd: fewer than one batch of 8
    _, cfg, _ = parse(mn, ["smoke", *flags, "--strides", "1", "--train.batch", "4"])
    mn.validate(cfg)
    _, cfg, _ = parse(mn, ["smoke", *flags[:-1], "128", "--train.batch", "2"])
    with pytest.raises(ValueError, match=r"^n_points=128: expected at most the 64 points"):
        mn.validate(cfg)


@pytest.mark.parametrize("name", MODULES)
def test_help_has_no_restructuredtext(name, capsys):
    with pytest.raises(SystemExit):
        parse(_exp(name), ["--help"])
    text = capsys.readouterr().out
    assert "--n-points" in text or "--n-pairs" in text  # the fields are listed
    assert re.findall(r"``|:func:|:class:|:meth:|:data:|:mod:", text) == []
