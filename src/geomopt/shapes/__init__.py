"""The data of the latent-interpolation experiments: 3-D shapes with known ground truth, digits.
The method and the experiments that use these are in :mod:`geomopt.latent` (above this package
and :mod:`geomopt.gfm`).

- :mod:`._family`: parametric solids (superquadric, torus, capsule, box), SDFs, marching-cubes
  meshes, surface sampling, and :func:`fit_family` (the closest family member to a cloud).
- :mod:`._metrics`: the official set-level metrics (FPS, normalisation, Chamfer / Hausdorff /
  F-score / coverage).
- :mod:`._model`: point-cloud encoder + SDF decoder (Equinox), its training, and decoding to
  meshes; the latent EDM denoiser's training.
- :mod:`._io`: users' own meshes and point clouds (``.obj`` / ``.off`` / ``.ply`` / ``.npy``).
- :mod:`._digits`: scikit-learn's 8x8 digits, a feature classifier and the image metrics
  (PPL, PDV, quality, FID) with the substitutes it makes possible.
"""

import lazy_loader as _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_family": [
            "CLASSES",
            "PARAM_NAMES",
            "PARAM_RANGES",
            "Shape",
            "fit_family",
            "grid_points",
            "mesh_from_grid",
            "random_shape",
            "random_shapes",
            "sample_surface",
            "sdf",
            "shape_mesh",
        ],
        "_digits": [
            "Classifier",
            "features",
            "frechet_distance",
            "load_digits",
            "path_scores",
            "perceptual_distance",
            "train_classifier",
        ],
        "_io": [
            "evaluate_folders",
            "load_folder",
            "load_shape",
        ],
        "_metrics": [
            "THRESHOLDS",
            "chamfer_matrix",
            "chamfer_pairs",
            "farthest_point_sample",
            "normalize_cloud",
            "prepare_clouds",
            "set_metrics",
        ],
        "_model": [
            "OUTPUT_INIT_SCALE",
            "AEConfig",
            "EDMTrainConfig",
            "ShapeAutoencoder",
            "decode_meshes",
            "decode_sdf_grid",
            "encode",
            "load_model",
            "save_model",
            "shape_training_data",
            "surface_clouds",
            "train_autoencoder",
            "train_latent_edm",
        ],
    },
)
