"""Canonization of point clouds: space-filling-curve orders, covering proxies, models, data.

Reproduces "When and How to Canonize: A Generalization Perspective" (Sverdlov, Friedman, Hordan,
Dym, 2026) in JAX; experiments and measured results: ``experiments/canon/README.md``.
"""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_classify": [
            "fit",
            "predict",
            "train_models",
        ],
        "_covering": [
            "DISTANCES",
            "assignment_distance",
            "covering_proxy",
            "fit_exponent",
            "pairwise_distances",
        ],
        "_digits": ["digits_clouds"],
        "_encoders": [
            "HILBERT_ENCODERS",
            "hilbert_encoder",
            "hilbert_encoders",
            "hilbert_index_with",
            "invert_or_swap",
        ],
        "_families": ["deformed_template_clouds"],
        "_holder": ["curve_modulus"],
        "_stability": ["stability_probe"],
        "_curves": [
            "hilbert_index",
            "hilbert_point",
            "int_to_words",
            "morton_index",
            "morton_point",
            "n_words",
            "words_to_int",
        ],
        "_data": [
            "farthest_point_sample",
            "load_modelnet",
            "load_modelnet_covering",
            "load_modelnet_h5",
            "shape_family_clouds",
            "subsample_points",
            "synthetic_clouds",
        ],
        "_model_config": [
            "MODEL_KINDS",
            "ORDER_PRESETS",
            "ModelConfig",
            "TrainConfig",
        ],
        "_models": [
            "CanonMLP",
            "DeepSets",
            "PermutationSampleAverage",
        ],
        "_layers": [
            "official_hilbert_order",
            "point_dropout",
        ],
        "_factory": [
            "make_model",
            "prepare_inputs",
        ],
        "_transformer": [
            "SerializedTransformer",
            "serializations",
        ],
        "_download": [
            "MODELNET40_URL",
            "next_commands",
            "prepare_modelnet",
        ],
        "_orders": [
            "ORDERS",
            "canonize",
            "checked",
            "get_order",
            "hilbert_order",
            "identity_order",
            "lex_order",
            "morton_order",
            "normalize_cloud",
            "quantize",
            "sort_by_words",
        ],
    },
)
