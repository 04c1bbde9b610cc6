"""Latent interpolation with GFM and its baselines: the pipeline, the study driver and the two
experiments that use them. This package sits above :mod:`geomopt.gfm` (the method) and
:mod:`geomopt.shapes` (the data), so neither imports the other.

- :mod:`._interp`: every interpolation method on latents (GFM, Jacobian, Stein, RBF, LAND,
  linear, SLERP) behind one interface, with the official noise / denoise pipeline and the
  clean endpoints pinned for every method.
- :mod:`._study`: one comparison of those methods over seeds (prepare -> interpolate ->
  score -> mean and 95 % interval), which the shapes and digits experiments declare.
- experiments ``exp_shapes`` (``gfm/shapes``) and ``exp_digits`` (``gfm/digits``).
"""

import lazy_loader as _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_interp": [
            "METHODS",
            "NOISED",
            "REGISTRY",
            "Method",
            "Problem",
            "Settings",
            "adam_energy",
            "heun_denoise",
            "interpolate_all",
            "slerp",
        ],
        "_study": [
            "Study",
            "Trial",
            "error_bars",
            "run_study",
            "summarise",
        ],
    },
)
