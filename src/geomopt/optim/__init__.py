"""Sign-based optimisers as optax GradientTransformations: SignSGD, Signum, Muon, and the
momentum SGD baseline of the paper, with the schedules of its GPT-2 recipe."""

from geomopt.optim._muon import default_labels as default_labels
from geomopt.optim._muon import labels_by_path as labels_by_path
from geomopt.optim._muon import muon as muon
from geomopt.optim._muon import orthogonalize_grouped as orthogonalize_grouped
from geomopt.optim._muon import scale_by_muon as scale_by_muon
from geomopt.optim._orthogonalize import orthogonalize as orthogonalize
from geomopt.optim._schedules import cosine_schedule as cosine_schedule
from geomopt.optim._schedules import one_cycle_schedule as one_cycle_schedule
from geomopt.optim._schedules import wsd_schedule as wsd_schedule
from geomopt.optim._sign import sgd as sgd
from geomopt.optim._sign import sign_sgd as sign_sgd
from geomopt.optim._sign import signum as signum
