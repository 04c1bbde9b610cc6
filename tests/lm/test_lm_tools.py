"""The sample and hellaswag tools end to end on a small byte-level model in an HF folder."""

import importlib.util
import json
from pathlib import Path

from flax import nnx

from geomopt.lm import GPT2, GPT2Config
from geomopt.lm._hf import save_hf_gpt2

ROOT = Path(__file__).resolve().parents[2]


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments/signsgd" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _byte_model(tmp_path):
    cfg = GPT2Config(vocab_size=256, n_layer=1, n_head=2, d_model=16, context=64)
    return save_hf_gpt2(GPT2(cfg, rngs=nnx.Rngs(0)), tmp_path / "hf")


def test_sample_tool_prints_each_prompt(tmp_path, capsys):
    tool = _tool("sample")
    folder = _byte_model(tmp_path)
    cfg = tool.Config(source=str(folder), prompt=("ab", "xyz"), num_samples=2, max_new_tokens=5)
    assert tool.main(cfg) == 0
    out = capsys.readouterr().out
    assert out.count("--- 'ab'") == 2 and out.count("--- 'xyz'") == 2


def test_sample_tool_explains_missing_tiktoken_files(tmp_path, capsys, monkeypatch):
    tool = _tool("sample")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    cfg = tool.Config(source=str(_byte_model(tmp_path)), tokenizer="gpt2")
    assert tool.main(cfg) == 2
    assert "TIKTOKEN_CACHE_DIR" in capsys.readouterr().err


def test_hellaswag_tool_prints_accuracies(tmp_path, capsys):
    tool = _tool("hellaswag")
    data = tmp_path / "hs.jsonl"
    rec = {"ctx": "The cat", "endings": ["sat.", "ran off.", "slept.", "ate."], "label": 1}
    data.write_text((json.dumps(rec) + "\n") * 3)
    cfg = tool.Config(source=str(_byte_model(tmp_path)), data=str(data), batch_examples=2)
    assert tool.main(cfg) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["n"] == 3 and out["truncated_rows"] == 0
    assert set(out) == {"n", "acc", "acc_norm", "acc_token_norm", "truncated_rows"}
