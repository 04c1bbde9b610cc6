"""SignSGD and Signum (initial version, delegating to optax)."""

import optax


def sign_sgd(learning_rate: optax.ScalarOrSchedule = 1e-3) -> optax.GradientTransformation:
    """x <- x - lr * sign(g)."""
    return optax.sign_sgd(learning_rate)


def signum(learning_rate: optax.ScalarOrSchedule = 1e-3, momentum: float = 0.9):
    """x <- x - lr * sign(m), m <- beta m + (1 - beta) g."""
    return optax.signum(learning_rate, momentum)
