"""A masked pre-training batch drawn as a grid: one column per sequence, one cell per token, coloured by what
the 80/10/10 corruption did to it (notebook 04, §4).

Reading the corrupted batch back needs the originals, and the labels carry them: a position with a label
(not -100) was chosen, and its label is the word that stood there.
"""
from __future__ import annotations

import torch

# kind -> (legend name, colour); the kind is the index
KINDS = (("untouched", "#f2f2f2"), ("[MASK] (80%)", "#e4572e"), ("random (10%)", "#f3a712"),
         ("same (10%)", "#29bf12"), ("[PAD]", "#bbbbbb"))


def masking_kinds(corrupted: torch.Tensor, labels: torch.Tensor, mask_token_id: int, pad_token_id: int) -> torch.Tensor:
    """(B, T) kinds: 0 untouched, 1 chosen and [MASK], 2 chosen and random, 3 chosen and the same, 4 padding."""
    original = torch.where(labels != -100, labels, corrupted)      # the labels give the originals back
    chosen = labels != -100
    kinds = torch.zeros_like(original)
    kinds[chosen & (corrupted == mask_token_id)] = 1
    kinds[chosen & (corrupted != mask_token_id) & (corrupted != original)] = 2
    kinds[chosen & (corrupted == original)] = 3
    kinds[original == pad_token_id] = 4
    return kinds


def plot_masked_batch(batch: dict, tokenizer, max_chars: int = 12):
    """The batch as the model sees it: each token written in its cell (cut to ``max_chars`` with an ellipsis),
    the cell coloured by its kind. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    corrupted, labels = batch["input_ids"], batch["labels"]
    kinds = masking_kinds(corrupted, labels, tokenizer.mask_token_id, tokenizer.pad_token_id)
    names, colors = zip(*KINDS)
    fig, ax = plt.subplots(figsize=(10, 7))   # one sequence per column, read downwards: room for whole word pieces
    ax.imshow(kinds.T.numpy(), cmap=ListedColormap(colors), vmin=-0.5, vmax=len(KINDS) - 0.5, aspect="auto")   # (T, B)
    for b in range(kinds.shape[0]):
        for t in range(kinds.shape[1]):
            token = tokenizer.convert_ids_to_tokens(int(corrupted[b, t]))
            text = token if len(token) <= max_chars else token[:max_chars - 1] + "…"
            ax.text(b, t, text, ha="center", va="center", fontsize=10)
    ax.set_xticks(range(kinds.shape[0]), [f"sequence {b}" for b in range(kinds.shape[0])], fontsize=10)
    ax.set(ylabel="position", title="A masked pre-training batch: what the model sees")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in colors], labels=list(names),
              loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=len(KINDS), fontsize=10)
    fig.tight_layout()
    return fig
