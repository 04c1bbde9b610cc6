"""GPT-2 pretraining in JAX: a Flax NNX model, token shards, and a sharded training loop.

Public API (re-exported from private modules):

- model: :class:`GPT2Config`, :data:`presets`, :class:`GPT2`, :func:`count_params`,
  :func:`abstract_param_count`, :func:`flops_per_token`, :func:`param_label`;
- data: :func:`write_shard`, :func:`read_shard`, :func:`read_legacy_bin`, :func:`open_tokens`,
  :class:`TokenData`, :class:`ByteTokenizer`, :func:`build_offline_corpus`, :class:`BatchLoader`,
  :class:`ShardError`;
- training: :class:`TrainConfig`, :class:`OptimConfig`, :class:`DataConfig`, :func:`train`,
  :func:`build_optimizer`, :func:`make_mesh`, :class:`NonFiniteLossError`;
- noise density: :func:`welford_variance`, :func:`noise_density`.
"""

from geomopt.lm._data import SHARD_MAGIC as SHARD_MAGIC
from geomopt.lm._data import SHARD_VERSION as SHARD_VERSION
from geomopt.lm._data import BatchLoader as BatchLoader
from geomopt.lm._data import ByteTokenizer as ByteTokenizer
from geomopt.lm._data import ShardError as ShardError
from geomopt.lm._data import TokenData as TokenData
from geomopt.lm._data import build_offline_corpus as build_offline_corpus
from geomopt.lm._data import offline_corpus_files as offline_corpus_files
from geomopt.lm._data import open_tokens as open_tokens
from geomopt.lm._data import read_legacy_bin as read_legacy_bin
from geomopt.lm._data import read_shard as read_shard
from geomopt.lm._data import write_shard as write_shard
from geomopt.lm._demo import DEMO_EXPERIMENTS as DEMO_EXPERIMENTS
from geomopt.lm._demo import demo_configs as demo_configs
from geomopt.lm._demo import plot_demo as plot_demo
from geomopt.lm._demo import run_demo as run_demo
from geomopt.lm._model import GPT2 as GPT2
from geomopt.lm._model import GPT2Config as GPT2Config
from geomopt.lm._model import abstract_param_count as abstract_param_count
from geomopt.lm._model import count_params as count_params
from geomopt.lm._model import flops_per_token as flops_per_token
from geomopt.lm._model import param_label as param_label
from geomopt.lm._model import param_labels as param_labels
from geomopt.lm._model import presets as presets
from geomopt.lm._noise import noise_density as noise_density
from geomopt.lm._noise import noise_group as noise_group
from geomopt.lm._noise import welford_variance as welford_variance
from geomopt.lm._prepare import GPT2Tokenizer as GPT2Tokenizer
from geomopt.lm._prepare import file_documents as file_documents
from geomopt.lm._prepare import get_tokenizer as get_tokenizer
from geomopt.lm._prepare import hf_documents as hf_documents
from geomopt.lm._prepare import write_shards as write_shards
from geomopt.lm._train import DataConfig as DataConfig
from geomopt.lm._train import NonFiniteLossError as NonFiniteLossError
from geomopt.lm._train import OptimConfig as OptimConfig
from geomopt.lm._train import TrainConfig as TrainConfig
from geomopt.lm._train import build_optimizer as build_optimizer
from geomopt.lm._train import lr_schedule as lr_schedule
from geomopt.lm._train import make_mesh as make_mesh
from geomopt.lm._train import peak_flops_per_device as peak_flops_per_device
from geomopt.lm._train import train as train
