"""Training: one loop for pre-training and fine-tuning (the Trainer), its settings, schedule, checkpoints."""
from .trainer import (AUTOCAST_DTYPES, PEAK_FLOPS, PRECISIONS, History, TrainConfig, Trainer, find_checkpoints,
                      flops_per_token, group_by_length, isolated_rng, learning_rate, make_optimizer, peak_flops,
                      pick_device, pick_precision, rng_state, seed_everything, set_rng_state)
