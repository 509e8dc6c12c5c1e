"""A training run at a glance: its `History` as loss, learning-rate and eval-metric curves."""
from __future__ import annotations

import matplotlib.pyplot as plt


def plot_history(history):
    """Loss (train and eval), learning rate and any other eval metric against the step of a
    `minibert.training.History`; returns the figure, 10 inches wide so a notebook shows it unshrunk.
    Every axis says what it measures; eval losses (``eval_mlm_loss``...) join the loss panel, and the
    other metrics (accuracies, F1, correlations) share one axis drawn from 0 (from -1 for a negative
    correlation) to 1, so that a small gain is not drawn as a large one."""
    evals = sorted({k for r in history.records for k in r if k.startswith("eval_") and k != "eval_loss"})
    losses, metrics = [k for k in evals if k.endswith("loss")], [k for k in evals if not k.endswith("loss")]
    fig, axes = plt.subplots(1, 2 + bool(metrics), figsize=(10, 3.5), squeeze=False)
    loss_ax, lr_ax = axes[0, 0], axes[0, 1]
    loss_ax.plot(*history.series("loss"), label="train")
    for name in ["eval_loss"] * (history.last("eval_loss") is not None) + losses:
        label = "eval" if name == "eval_loss" else f"{name.removeprefix('eval_').replace('_', ' ')} (eval)"
        loss_ax.plot(*history.series(name), "o-", label=label)
    loss_ax.set(xlabel="step", ylabel="cross-entropy (nats)", title="loss")
    loss_ax.legend()
    lr_ax.plot(*history.series("lr"))
    lr_ax.set(xlabel="step", ylabel="learning rate", title="learning rate")
    lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3), useMathText=True)   # 8×10⁻⁵, not 0.00008
    values = []
    for name in metrics:
        steps, series = history.series(name)
        values += list(series)
        axes[0, 2].plot(steps, series, "o-", label=name.removeprefix("eval_"))
    if metrics:
        on_unit_scale = all(-1 <= v <= 1 for v in values)
        axes[0, 2].set(xlabel="step", ylabel="score on the eval set", title="eval metrics",
                       ylim=(-1.02 if min(values) < 0 else 0, 1.02) if on_unit_scale else None)
        axes[0, 2].legend()
    fig.tight_layout()
    return fig
