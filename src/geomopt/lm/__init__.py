"""GPT-2 pretraining in JAX: a Flax NNX model, token shards, and a sharded training loop.

Public API (re-exported from private modules):

- model: :class:`GPT2Config`, :data:`presets`, :class:`GPT2`, :func:`count_params`,
  :func:`abstract_param_count`, :func:`flops_per_token`, :func:`param_label`;
- data: :func:`write_shard`, :func:`read_shard`, :func:`read_legacy_bin`, :func:`open_tokens`,
  :class:`TokenData`, :class:`ByteTokenizer`, :func:`build_offline_corpus`, :class:`BatchLoader`,
  :class:`ShardError`;
- training: :class:`TrainConfig`, :class:`OptimConfig`, :class:`DataConfig`, :func:`train`
  (on a :class:`geomopt.experiment.Run`), :class:`Trainer`, :class:`Checkpoints`,
  :class:`MetricSinks`, :func:`build_optimizer`, :func:`make_mesh`, :func:`device_peak_flops`,
  :class:`NonFiniteLossError`, :class:`CheckpointWriteError`, :func:`start_distributed` and
  :class:`DistributedError` (multi-process launches); experiments ``exp_pretrain``
  (``signsgd/pretrain``) and ``exp_pretrain_demo`` (``signsgd/pretrain_demo``);
- noise density: :func:`welford_variance`, :func:`noise_density`.
"""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_config": [
            "DataConfig",
            "GPT2Config",
            "OptimConfig",
            "TrainConfig",
            "presets",
        ],
        "_data": [
            "LLAMA3_MAGIC",
            "SHARD_KINDS",
            "SHARD_MAGIC",
            "SHARD_VERSION",
            "BatchLoader",
            "ByteTokenizer",
            "ShardError",
            "TokenData",
            "build_offline_corpus",
            "detect_format",
            "offline_corpus_files",
            "open_tokens",
            "read_legacy_bin",
            "read_shard",
            "write_shard",
        ],
        "_hellaswag": [
            "HellaSwagExample",
            "evaluate_hellaswag",
            "hellaswag_evaluator",
            "read_hellaswag",
        ],
        "_hf": [
            "load_hf_gpt2",
            "save_hf_gpt2",
        ],
        "_loss": [
            "chunked_cross_entropy",
        ],
        "_model": [
            "GPT2",
            "Block",
            "abstract_param_count",
            "causal_attention",
            "count_params",
            "flops_per_token",
            "param_label",
            "param_labels",
        ],
        "_noise": [
            "noise_density",
            "noise_group",
            "welford_variance",
        ],
        "_sample": [
            "load_model",
            "sample",
            "tiktoken_gpt2_missing",
            "tokenizer_for_model",
        ],
        "_prepare": [
            "GPT2Tokenizer",
            "count_tokens",
            "file_documents",
            "get_tokenizer",
            "hf_documents",
            "validation_tokens",
            "write_shards",
        ],
        "_distributed": [
            "DistributedError",
            "start_distributed",
        ],
        "_checkpoints": [
            "CheckpointWriteError",
            "Checkpoints",
        ],
        "_train": [
            "NonFiniteLossError",
            "Trainer",
            "train",
        ],
        "_optimizer": [
            "build_optimizer",
            "lr_schedule",
        ],
        "_sharding": [
            "make_mesh",
            "train_batch",
        ],
        "_metrics": [
            "MetricSinks",
            "device_peak_flops",
            "measured_matmul_flops",
            "peak_flops_per_device",
        ],
        "_config_checks": [
            "check_train_config",
        ],
    },
)
