"""Sign-based optimisers as optax GradientTransformations: SignSGD, Signum, Muon, and the
momentum SGD baseline of the paper, with the schedules of its GPT-2 recipe; one table of them
by name (:data:`OPTIMIZERS`, :func:`make_optimizer`, :func:`register_optimizer`)."""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_cautious": [
            "add_cautious_decayed_weights",
        ],
        "_muon": [
            "blocks_by_path",
            "default_labels",
            "labels_by_path",
            "muon",
            "orthogonalize_grouped",
            "scale_by_muon",
        ],
        "_normuon": [
            "scale_by_normuon",
        ],
        "_orthogonalize": [
            "orthogonalize",
        ],
        "_qk_clip": [
            "QKClipState",
            "muon_clip",
            "qk_clip",
        ],
        "_registry": [
            "OPTIMIZERS",
            "make_optimizer",
            "orthogonalized_sgd",
            "register_optimizer",
        ],
        "_schedules": [
            "cosine_schedule",
            "one_cycle_schedule",
            "wsd_schedule",
        ],
        "_sharded": [
            "orthogonalize_sharded",
        ],
        "_sign": [
            "sgd",
            "sign_sgd",
            "signum",
        ],
    },
)
