"""A training run at a glance: its `History` as loss, learning-rate and eval-metric curves."""
from __future__ import annotations

import matplotlib.pyplot as plt


def plot_history(history):
    """Loss (train and eval), learning rate and any other eval metric against the step of a
    `minibert.training.History`; returns the figure, 10 inches wide so a notebook shows it unshrunk."""
    metrics = sorted({k for r in history.records for k in r if k.startswith("eval_") and k != "eval_loss"})
    fig, axes = plt.subplots(1, 2 + bool(metrics), figsize=(10, 3.5), squeeze=False)
    loss_ax, lr_ax = axes[0, 0], axes[0, 1]
    loss_ax.plot(*history.series("loss"), label="train")
    if history.last("eval_loss") is not None:
        loss_ax.plot(*history.series("eval_loss"), "o-", label="eval")
    loss_ax.set(xlabel="step", ylabel="loss", title="loss")
    loss_ax.legend()
    lr_ax.plot(*history.series("lr"))
    lr_ax.set(xlabel="step", ylabel="learning rate", title="learning rate")
    for name in metrics:
        axes[0, 2].plot(*history.series(name), "o-", label=name.removeprefix("eval_"))
    if metrics:
        axes[0, 2].set(xlabel="step", title="eval metrics")
        axes[0, 2].legend()
    fig.tight_layout()
    return fig
