"""Canonization of point clouds: space-filling-curve orders, covering proxies, models, data.

Reproduces "When and How to Canonize: A Generalization Perspective" (Sverdlov, Friedman, Hordan,
Dym, 2026) in JAX; experiments and measured results: ``experiments/canon/README.md``.
"""

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
