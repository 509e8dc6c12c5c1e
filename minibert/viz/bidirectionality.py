"""The bidirectionality curve (notebook 04d): the part-of-speech probe along pre-training, a masked LM against a
left-to-right LM, each read against the lookup tables that say what the context alone or the word alone gives.

One picture for every scale the curve is measured at (a CPU hour, a GPU's minutes: `minibert experiment
bidirectionality`, benchmarks/gpu_both_sides.sh), so that two curves drawn beside each other are drawn alike.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

LABELS = {"mlm": "masked LM (BERT)", "ltr": "left to right (GPT)"}


def plot_curve(along: dict, refs: dict, title: str | None = None):
    """Two panels of a bidirectionality grid's curve: ``along`` maps "hidden_pos_accuracy" and "pos_accuracy" to
    `minibert.experiments.bidirectionality.curve_summary` of its runs, ``refs`` is its results file's
    "references". The probe with each word hidden (its tag from the context alone), against lookup tables of the
    word before and of both neighbours; and with the word visible, against the word itself looked up. Each
    objective's mean over seeds, with one standard deviation as error bars; the untrained encoder's level in
    both. Returns the figure."""
    panels = [("hidden_pos_accuracy", "POS with the word hidden",
               {"both neighbours, looked up": refs["neighbours_pos_accuracy"],
                "the word before, looked up": refs["left_neighbour_pos_accuracy"],
                "untrained encoder": refs["untrained_hidden_pos_accuracy"]}),
              ("pos_accuracy", "POS with the word visible",
               {"the word itself, looked up": refs["word_identity_pos_accuracy"],
                "untrained encoder": refs["untrained_pos_accuracy"]})]
    fig, axes = plt.subplots(1, 2, figsize=(10, 6))
    for ax, (measure, panel_title, lines) in zip(axes, panels):
        for objective, color in [("mlm", "C0"), ("ltr", "C1")]:
            if objective in along[measure]:
                steps, means, sds, _ = zip(*along[measure][objective])
                ax.errorbar(steps, means, yerr=sds, fmt="o-", capsize=4, color=color, label=LABELS[objective])
        for (name, value), style in zip(lines.items(), ["--", "-.", ":"]):
            ax.axhline(value, color="black", ls=style, lw=1, label=name)
        ax.set(title=panel_title, xlabel="pre-training step", ylabel="probe accuracy (UD EWT test)")
        ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.15))   # below: off the crossing
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
