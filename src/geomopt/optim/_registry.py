"""One table of optimisers: name -> factory ``(learning_rate, **kwargs) -> GradientTransformation``.

Every runner (the toy problems, GPT-2 pretraining, the pretraining demo) builds its optimiser
through :func:`make_optimizer`, so a name means the same update everywhere and its keyword
arguments are the factory's own (``make_optimizer("sgd", 0.1)`` is ``optim.sgd(0.1)``, momentum
0.9; ``make_optimizer("sgd", 0.1, momentum=0.0)`` is plain SGD). A new optimiser is one
:func:`register_optimizer` call, or a factory passed where a runner takes one.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable

import jax
import optax

__all__ = [
    "OPTIMIZERS",
    "make_optimizer",
    "register_optimizer",
    "orthogonalized_sgd",
]


def orthogonalized_sgd(
    learning_rate: optax.ScalarOrSchedule = 1e-2, method: str = "svd"
) -> optax.GradientTransformation:
    """The theory's Muon without momentum: ``W <- W - lr * msign(G)`` on every matrix leaf,
    with ``msign`` from :func:`geomopt.optim.orthogonalize` (``"svd"`` exact, or
    ``"newton_schulz"``)."""
    from geomopt.optim._orthogonalize import orthogonalize

    def update(updates, state, params=None):
        del params
        return jax.tree.map(lambda g: orthogonalize(g, method=method), updates), state

    return optax.chain(
        optax.GradientTransformation(lambda p: optax.EmptyState(), update),
        optax.scale_by_learning_rate(learning_rate),
    )


def _builtin() -> dict[str, Callable[..., optax.GradientTransformation]]:
    """The built-in table. The Muon variants are :func:`geomopt.optim.muon` with one option
    set (a ``functools.partial``, so every other option of ``muon`` is still theirs):

    - ``normuon``: NorMuon's neuron-wise normalisation (``normuon=True``);
    - ``muon_cautious``: cautious weight decay (``cautious_weight_decay=True``; acts only with
      a ``weight_decay``);
    - ``muon_aol``: AOL preconditioning with one Newton-Schulz step fewer (Turbo-Muon:
      ``preconditioning="aol"``, ``ns_steps=4``);
    - ``muon_qkv``: fused ``qkv`` weights orthogonalised as Q, K and V
      (``blocks=blocks_by_path("qkv", 3)``);
    - ``muon_clip``: Muon then QK-clip at 100 (:func:`geomopt.optim.muon_clip`; its update
      takes ``attn_logit_max``).
    """
    from geomopt.optim._muon import blocks_by_path, muon
    from geomopt.optim._qk_clip import muon_clip
    from geomopt.optim._sign import sgd, sign_sgd, signum

    return {
        "sgd": sgd,
        "sign_sgd": sign_sgd,
        "signum": signum,
        "muon": muon,
        "normuon": functools.partial(muon, normuon=True),
        "muon_cautious": functools.partial(muon, cautious_weight_decay=True),
        "muon_aol": functools.partial(muon, preconditioning="aol", ns_steps=4),
        "muon_qkv": functools.partial(muon, blocks=blocks_by_path("qkv", 3)),
        "muon_clip": muon_clip,
        "orthogonalized_sgd": orthogonalized_sgd,
        "adamw": optax.adamw,
    }


_TABLE: dict[str, Callable[..., optax.GradientTransformation]] = _builtin()
OPTIMIZERS = types.MappingProxyType(_TABLE)
"""Read-only view of the registered optimisers: name -> factory."""


def register_optimizer(
    name: str, factory: Callable[..., optax.GradientTransformation], *, replace: bool = False
) -> None:
    """Add ``factory(learning_rate, **kwargs) -> GradientTransformation`` under ``name``.

    Raises:
        ValueError: ``name`` is taken (pass ``replace=True`` to replace it) or empty.
        TypeError: ``factory`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"optimizer name {name!r}: expected a non-empty string")
    if not callable(factory):
        raise TypeError(f"optimizer {name!r}: factory {factory!r} is not callable")
    if name in _TABLE and not replace:
        raise ValueError(f"optimizer {name!r} is already registered; pass replace=True")
    _TABLE[name] = factory


def make_optimizer(name: str, learning_rate, **kwargs) -> optax.GradientTransformation:
    """``OPTIMIZERS[name](learning_rate, **kwargs)``.

    Raises:
        ValueError: unknown ``name`` (the message lists the registered ones), or a keyword the
            factory does not take (the message lists those it does).
    """
    if name not in _TABLE:
        raise ValueError(f"optimizer {name!r}: expected one of {sorted(_TABLE)}")
    factory = _TABLE[name]
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        bad = sorted(set(kwargs) - set(sig.parameters))
        if bad:
            known = [p for p in sig.parameters if p != "learning_rate"]
            raise ValueError(f"optimizer {name!r}: no option {bad}; it takes {known}")
    return factory(learning_rate, **kwargs)
