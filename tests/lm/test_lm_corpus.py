"""A user's own corpus, start to finish, with README_pretrain's commands (the entry points'
own command lines, in process): prepare_data.py files -> pretrain.py smoke on the shards ->
sample.py -> hellaswag.py; and the refusals on the way (a glob matching nothing, train/val
globs that the offline source would ignore, a token file of unknown format)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from geomopt.experiment import main as experiment_main
from geomopt.experiment import tool_main
from geomopt.lm import ShardError, open_tokens, read_shard
from geomopt.lm._config_checks import check_train_config
from geomopt.lm.exp_pretrain import EXPERIMENT, PRESETS

EXPERIMENTS = Path(__file__).parents[2] / "experiments" / "signsgd"


def tool(name):
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return lambda argv: tool_main(f"{name}.py", module.main, module.parse, argv)


def write_corpus(folder: Path, n_bytes: int = 300_000) -> None:
    """A few text files of about ``n_bytes`` in all (random words, so seeded and offline)."""
    rng = np.random.default_rng(0)
    words = ["the", "model", "learns", "a", "corpus", "of", "words", "and", "signs", "quickly"]
    folder.mkdir(parents=True)
    for i in range(3):
        text = " ".join(rng.choice(words, size=n_bytes // 3 // 6)) + "\n"
        (folder / f"part{i}.txt").write_text(text)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(root / "corpus")
    argv = ["files", "--files", str(root / "corpus" / "*.txt"), "--tokenizer", "byte",
            "--out-dir", str(root / "data" / "mine"), "--prefix", "mine"]  # fmt: skip
    assert tool("prepare_data")(argv) == 0
    return root


def test_small_corpus_gets_both_splits(prepared):
    folder = prepared / "data" / "mine"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["mine_train_000001.bin", "mine_val_000000.bin"]
    total = sum(len((prepared / "corpus" / f"part{i}.txt").read_bytes()) + 1 for i in range(3))
    val, train = (read_shard(folder / n, vocab_size=256).size for n in names[::-1])
    assert val + train == total
    assert val == round(0.1 * total)  # the default validation fraction


def test_prepare_pretrain_sample_hellaswag_with_the_readme_commands(prepared, capsys):
    data = prepared / "data" / "mine"
    argv = ["smoke", "--data.train", str(data / "mine_train_*.bin"),
            "--data.val", str(data / "mine_val_*.bin"), "--out", str(prepared / "results"),
            "--name", "mine", "--steps", "2", "--eval-every", "0", "--ckpt-every", "0"]  # fmt: skip
    assert experiment_main(EXPERIMENT, argv) == 0, capsys.readouterr().err
    run = prepared / "results" / "signsgd" / "pretrain" / "mine"
    assert (run / "checkpoints" / "2").is_dir()

    capsys.readouterr()
    argv = ["--source", str(run), "--prompt", "The ", "--prompt", "Once upon",
            "--max-new-tokens", "20"]  # fmt: skip
    assert tool("sample")(argv) == 0
    out = capsys.readouterr().out
    assert "--- 'The '" in out and "--- 'Once upon'" in out, out

    hs = prepared / "hs.jsonl"
    rows = [{"ctx": "the model", "endings": ["learns", "signs", "a", "of"], "label": i % 4}
            for i in range(3)]  # fmt: skip
    hs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert tool("hellaswag")(["--source", str(run), "--data", str(hs)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["n"] == 3 and 0 <= result["acc"] <= 1


def test_glob_matching_nothing_is_one_line(tmp_path, capsys):
    argv = ["files", "--files", str(tmp_path / "nothing" / "*.txt"), "--tokenizer", "byte"]
    assert tool("prepare_data")(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "matches no file" in err, err


def test_train_val_globs_with_the_offline_source_are_refused_naming_the_conflict(prepared):
    import dataclasses

    smoke = PRESETS["smoke"]
    train = str(prepared / "data/mine/mine_train_*.bin")
    data = dataclasses.replace(smoke.data, source="offline", train=train)
    with pytest.raises(ValueError, match=r"data.train=.* data.source='offline'.*--data.source"):
        check_train_config(dataclasses.replace(smoke, data=data))


def test_train_glob_alone_names_the_missing_val_glob(prepared):
    import dataclasses

    smoke = PRESETS["smoke"]
    data = dataclasses.replace(smoke.data, train=str(prepared / "data/mine/mine_train_*.bin"))
    assert data.source == "auto" and data.resolved_source == "shards"
    with pytest.raises(ValueError, match=r"data.val='': .*needs a val glob.*data.train="):
        check_train_config(dataclasses.replace(smoke, data=data))
    assert smoke.data.resolved_source == "offline"


def test_auto_format_refuses_an_unknown_magic(tmp_path):
    path = tmp_path / "x.bin"
    np.arange(600, dtype=np.uint16).tofile(path)
    with pytest.raises(ShardError, match=r"20240520.*20240801.*format='nanogpt'"):
        open_tokens(path)
    np.testing.assert_array_equal(open_tokens(path, format="nanogpt"), np.arange(600))
