"""Training: one loop for pre-training and fine-tuning (the Trainer), its settings, schedule, checkpoints,
evaluation as a plain function, and batches of examples of different lengths."""
from .batching import batches_by_length, example_lengths, group_by_length, pad, pad_with_mask, to_device
from .checkpoint import find_checkpoints, isolated_rng, rng_state, seed_everything, set_rng_state
from .config import RESUME_SAFE_FIELDS, TrainConfig
from .evaluate import evaluate
from .history import History
from .precision import (AUTOCAST_DTYPES, PEAK_FLOPS, PRECISIONS, flops_per_token, peak_flops, pick_device,
                        pick_precision)
from .schedule import make_optimizer, warmup_linear_decay
from .trainer import Trainer
