"""msign(G) = U V^T by SVD or Newton-Schulz (initial version)."""

import jax.numpy as jnp

QUINTIC = (3.4445, -4.7750, 2.0315)


def orthogonalize(g, method: str = "newton_schulz", steps: int = 5, eps: float = 1e-7):
    """The polar factor U V^T of the last two axes of ``g``."""
    if method == "svd":
        u, _, vt = jnp.linalg.svd(g, full_matrices=False)
        return u @ vt
    if method != "newton_schulz":
        raise ValueError(f"method {method!r}: expected 'svd' or 'newton_schulz'")
    a, b, c = QUINTIC
    transpose = g.shape[-2] > g.shape[-1]
    x = jnp.swapaxes(g, -1, -2) if transpose else g
    x = x / (jnp.linalg.norm(x, axis=(-2, -1), keepdims=True) + eps)
    for _ in range(steps):
        A = x @ jnp.swapaxes(x, -1, -2)
        B = b * A + c * A @ A
        x = a * x + B @ x
    return jnp.swapaxes(x, -1, -2) if transpose else x
