"""Generate text from a GPT-2: the newest or a chosen checkpoint of a pretraining run folder,
or a Hugging Face GPT-2 folder with config.json and model.safetensors. Prints each prompt
followed by its sampled continuation. A tool, not an experiment.

Examples:
    uv run experiments/signsgd/sample.py --source results/signsgd/pretrain/quick --prompt "def "
    uv run experiments/signsgd/sample.py --source ~/gpt2 --prompt "Hello," --num-samples 4

Byte-level models (vocabulary 256) decode bytes; other models use tiktoken's GPT-2 BPE, which
must be in tiktoken's local cache (the tool says how when it is not). The work happens in
geomopt.lm._sample.
Errors are one line; --debug (or GEOMOPT_DEBUG=1) prints the traceback.
"""

import dataclasses
import sys
from typing import Annotated, Literal

import tyro

from geomopt.experiment import tool_main


@dataclasses.dataclass(frozen=True)
class Config:
    source: str
    """A pretraining run folder (newest checkpoint under checkpoints/) or an HF GPT-2 folder
    (config.json + model.safetensors)."""
    prompt: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """A prompt; repeat the flag for several (one row each; none: a newline)."""
    num_samples: int = 1
    """Samples per prompt (batched together)."""
    max_new_tokens: int = 64
    """Tokens generated per sample."""
    temperature: float = 0.8
    """Softmax temperature; 0 is greedy decoding."""
    top_k: int = 50
    """Keep only the k most likely tokens (0: all)."""
    top_p: float = 1.0
    """Nucleus sampling: keep the most likely tokens up to this probability mass (1: all)."""
    seed: int = 0
    """Random seed of the draws."""
    step: int = -1
    """Checkpoint step of a run folder (-1: the newest)."""
    tokenizer: Literal["auto", "gpt2", "byte"] = "auto"
    """auto: bytes for a vocabulary of 256, GPT-2 BPE (tiktoken) otherwise."""


def main(cfg: Config) -> int:
    import jax

    from geomopt.lm import ByteTokenizer, load_model, sample, tiktoken_gpt2_missing

    model = load_model(cfg.source, step=None if cfg.step < 0 else cfg.step)
    kind = cfg.tokenizer
    if kind == "auto":
        kind = "byte" if model.config.vocab_size == 256 else "gpt2"
    if kind == "gpt2":
        missing = tiktoken_gpt2_missing()
        if missing:
            print(missing, file=sys.stderr)
            return 2
        from geomopt.lm import GPT2Tokenizer

        tok = GPT2Tokenizer()
    else:
        tok = ByteTokenizer()
    prompts = [p for p in cfg.prompt or ("\n",) for _ in range(cfg.num_samples)]
    encoded = [[int(t) for t in tok.encode(p)] for p in prompts]
    out = sample(
        model,
        encoded,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_k=cfg.top_k,
        top_p=cfg.top_p,
        key=jax.random.key(cfg.seed),
    )
    for prompt, new in zip(prompts, out, strict=True):
        print(f"--- {prompt!r}\n{prompt}{tok.decode(new.tolist())}")
    return 0


def parse(argv: list[str]) -> Config:
    return tyro.cli(Config, args=argv, description=__doc__)


if __name__ == "__main__":
    sys.exit(tool_main("sample.py", main, parse))
