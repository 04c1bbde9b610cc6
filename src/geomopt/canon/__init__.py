"""Canonization of point clouds: space-filling-curve orders, covering proxies, models, data.

Reproduces "When and How to Canonize: A Generalization Perspective" (Sverdlov, Friedman, Hordan,
Dym, 2026) in JAX; experiments and measured results: ``experiments/canon/README.md``.
"""

from geomopt.canon._classify import ClassifyConfig as ClassifyConfig
from geomopt.canon._classify import TrainConfig as TrainConfig
from geomopt.canon._classify import accuracy as accuracy
from geomopt.canon._classify import plot_classify as plot_classify
from geomopt.canon._classify import run_classify as run_classify
from geomopt.canon._classify import train_models as train_models
from geomopt.canon._covering import DISTANCES as DISTANCES
from geomopt.canon._covering import assignment_distance as assignment_distance
from geomopt.canon._covering import covering_proxy as covering_proxy
from geomopt.canon._covering import fit_exponent as fit_exponent
from geomopt.canon._covering import pairwise_distances as pairwise_distances
from geomopt.canon._covering import regularity_probe as regularity_probe
from geomopt.canon._curves import hilbert_index as hilbert_index
from geomopt.canon._curves import hilbert_point as hilbert_point
from geomopt.canon._curves import int_to_words as int_to_words
from geomopt.canon._curves import morton_index as morton_index
from geomopt.canon._curves import morton_point as morton_point
from geomopt.canon._curves import n_words as n_words
from geomopt.canon._curves import words_to_int as words_to_int
from geomopt.canon._data import load_modelnet_h5 as load_modelnet_h5
from geomopt.canon._data import synthetic_clouds as synthetic_clouds
from geomopt.canon._models import MODEL_KINDS as MODEL_KINDS
from geomopt.canon._models import ORDER_PRESETS as ORDER_PRESETS
from geomopt.canon._models import CanonMLP as CanonMLP
from geomopt.canon._models import DeepSets as DeepSets
from geomopt.canon._models import GroupAveraged as GroupAveraged
from geomopt.canon._models import ModelConfig as ModelConfig
from geomopt.canon._models import make_model as make_model
from geomopt.canon._models import point_dropout as point_dropout
from geomopt.canon._orders import ORDERS as ORDERS
from geomopt.canon._orders import canonize as canonize
from geomopt.canon._orders import get_order as get_order
from geomopt.canon._orders import hilbert_order as hilbert_order
from geomopt.canon._orders import identity_order as identity_order
from geomopt.canon._orders import lex_order as lex_order
from geomopt.canon._orders import morton_order as morton_order
from geomopt.canon._orders import normalize_cloud as normalize_cloud
from geomopt.canon._orders import quantize as quantize
from geomopt.canon._orders import sort_by_words as sort_by_words
