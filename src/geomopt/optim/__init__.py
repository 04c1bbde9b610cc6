"""Sign-based optimisers as optax GradientTransformations: SignSGD, Signum, Muon.

(Initial version: ``sign_sgd``, ``signum`` and ``orthogonalize``; being extended.)
"""

from geomopt.optim._orthogonalize import orthogonalize as orthogonalize
from geomopt.optim._sign import sign_sgd as sign_sgd
from geomopt.optim._sign import signum as signum
