"""Strict JAX settings for the whole suite, several virtual CPU devices, and a key fixture.

The flags are set before any test touches a JAX backend: rank promotion raises (so a broadcast
that was not meant fails loudly) and the CPU exposes ``N_DEVICES`` virtual devices for the
sharding tests.
"""

import os

N_DEVICES = 4
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", N_DEVICES)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def key():
    """A fresh typed PRNG key; tests split it where they use it."""
    return jax.random.key(0)


@pytest.fixture
def n_devices():
    return N_DEVICES
