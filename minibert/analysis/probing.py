"""Feature-based probes: what a frozen encoder's vectors know, read off by a linear classifier.

The paper's second way to use BERT (§5.3) keeps the encoder frozen and trains only a small model on
its hidden states. A *linear* probe is the strictest version: if a softmax regression on the
vectors can tell a noun from a verb, the vectors carry part of speech in a linearly readable form.
The probe is fitted full-batch with L-BFGS, so the same features always give the same accuracy:
differences between encoders are differences in what they encode, not in how the probe was trained.

Words are the unit of a treebank but word pieces are the unit of BERT; a word is represented by
its first piece, as the paper does for NER (§5.3).

Which hidden states to read is the question of the paper's Table 7: the last layer, the second to
last, the last four concatenated, or a learned weighted sum of layers (`WeightedLayerSum`, ELMo's
scalar mix), which the probe learns together with its classifier.
"""
from __future__ import annotations

from collections import Counter
from itertools import chain

import torch
from torch import Tensor, nn

from ..modes import eval_mode
from ..padding import pad, pad_with_mask


@torch.inference_mode()
def word_features(model: nn.Module, tokenizer, sentences: list[list[str]], layers: tuple[int, ...] = (-1,),
                  batch_size: int = 64, stack: bool = False) -> tuple[Tensor, Tensor]:
    """The hidden state of each word's first piece, concatenated over ``layers`` (indices into
    ``hidden_states``: 0 = embeddings, -1 = last layer).

    Returns ``(features, kept)``: features (N_kept, H × len(layers)), or (N_kept, len(layers), H)
    with ``stack=True`` (the input of a `WeightedLayerSum`), and a boolean (N_words,) over all
    words of all sentences, False for words cut off because a sentence is longer than the model
    takes. ``model``: a BertModel or any head model with a ``.bert`` encoder.
    """
    encoder = getattr(model, "bert", model)
    max_length = encoder.config.max_position_embeddings
    with eval_mode(encoder):
        device = next(encoder.parameters()).device
        features, kept = [], []
        for start in range(0, len(sentences), batch_size):
            batch = sentences[start:start + batch_size]
            enc = tokenizer(batch, is_split_into_words=True, truncation=True, max_length=max_length)
            ids, mask = pad_with_mask(enc["input_ids"], tokenizer.pad_token_id)               # (B, T) each
            states = encoder(input_ids=ids.to(device), attention_mask=mask.to(device),
                             output_hidden_states=True).hidden_states
            chosen = torch.stack([states[layer] for layer in layers], dim=2)                  # (B, T, L, H)
            word_ids = pad([[-1 if w is None else w for w in enc.word_ids(i)] for i in range(len(batch))], -1)
            previous = torch.cat([torch.full_like(word_ids[:, :1], -1), word_ids[:, :-1]], dim=1)
            first = (word_ids >= 0) & (word_ids != previous)                                  # (B, T): a word's first piece
            features.append(chosen[first.to(device)])                  # (N_b, L, H), sentence by sentence, word by word
            # Truncation cuts a sentence's last words, so its first n words are the kept ones.
            kept += [w < n for words, n in zip(batch, first.sum(1).tolist()) for w in range(len(words))]
    features = torch.cat(features).float().cpu()
    return (features if stack else features.flatten(1)), torch.tensor(kept)   # flat: (N, L·H), layer after layer


@torch.inference_mode()
def hidden_word_features(model: nn.Module, tokenizer, sentences: list[list[str]], layer: int = -1,
                         batch_size: int = 64) -> tuple[Tensor, Tensor]:
    """Each word's features when the word itself is hidden: the sentence is shown once per word, that
    word (all its pieces) replaced by [MASK], and the state at its first piece is taken.

    What is left at that position comes from the context alone: both sides for a masked LM, the
    words before it for a left-to-right one. Returns ``(features, kept)`` as `word_features` does
    (N_kept, H), with ``kept`` False for words beyond the model's length.
    """
    encoder = getattr(model, "bert", model)
    max_length = encoder.config.max_position_embeddings
    with eval_mode(encoder):
        device = next(encoder.parameters()).device
        copies = [(s, i) for s, words in enumerate(sentences) for i in range(len(words))]  # (sentence, hidden word)
        features, kept = [], []
        for start in range(0, len(copies), batch_size):
            batch = copies[start:start + batch_size]
            shown = [[tokenizer.mask_token if j == i else w for j, w in enumerate(sentences[s])] for s, i in batch]
            enc = tokenizer(shown, is_split_into_words=True, truncation=True, max_length=max_length)
            ids, mask = pad_with_mask(enc["input_ids"], tokenizer.pad_token_id)               # (B, T) each
            states = encoder(input_ids=ids.to(device), attention_mask=mask.to(device),
                             output_hidden_states=True).hidden_states[layer]                  # (B, T, H)
            for row, (_, i) in enumerate(batch):
                position = next((t for t, w in enumerate(enc.word_ids(row)) if w == i), None)
                kept.append(position is not None)  # None: the word was cut off by truncation
                if position is not None:
                    features.append(states[row, position])
    return torch.stack(features).float().cpu(), torch.tensor(kept)


class WeightedLayerSum(nn.Module):
    """The paper's "weighted sum" of layers (Table 7), ELMo's scalar mix (Peters et al. 2018, eq. 1):
    γ Σ_j s_j h_j with s = softmax(w).

    The softmax keeps the weights s positive and summing to 1, so they read as how much of each layer
    a task uses; γ scales the mixture for what comes after it. w = 0 starts from the plain average.
    """

    def __init__(self, num_layers: int):
        super().__init__()
        self.scalars = nn.Parameter(torch.zeros(num_layers))  # w
        self.gamma = nn.Parameter(torch.ones(()))

    @property
    def weights(self) -> Tensor:
        return self.scalars.softmax(0)  # s: (L,)

    def forward(self, layers: Tensor) -> Tensor:
        return self.gamma * torch.einsum("l,...lh->...h", self.weights, layers)  # (..., L, H) -> (..., H)


class LinearProbe(nn.Module):
    """Softmax regression on frozen features, with an L2 penalty, fitted to convergence by L-BFGS.

    Features are standardised with the training set's mean and spread first, so one penalty
    strength suits encoders whose hidden states have very different scales. With ``num_layers``,
    the features are stacked layers (N, L, H), standardised layer by layer, and a `WeightedLayerSum`
    learned with the classifier combines them into (N, H). Its scale γ stays 1 here: in front of a
    linear layer it would only trade off against the weights and so escape the L2 penalty.
    """

    def __init__(self, num_features: int, num_classes: int, l2: float = 1e-3, num_layers: int | None = None):
        super().__init__()
        self.linear = nn.Linear(num_features, num_classes)
        self.l2 = l2
        self.mix = None
        if num_layers is not None:
            self.mix = WeightedLayerSum(num_layers)
            self.mix.gamma.requires_grad_(False)
        shape = (num_features,) if num_layers is None else (num_layers, num_features)
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("std", torch.ones(shape))

    def forward(self, features: Tensor) -> Tensor:
        return self.classify((features - self.mean) / self.std)

    def classify(self, standardized: Tensor) -> Tensor:
        """Logits of standardised features: (N, F), or (N, L, H) with a mix."""
        return self.linear(standardized if self.mix is None else self.mix(standardized))

    def fit(self, features: Tensor, labels: Tensor, max_iter: int = 200) -> "LinearProbe":
        self.mean, self.std = features.mean(0), features.std(0).clamp_min(1e-6)
        standardized = (features - self.mean) / self.std  # once, not at every one of L-BFGS's evaluations
        optimizer = torch.optim.LBFGS([p for p in self.parameters() if p.requires_grad], max_iter=max_iter,
                                      history_size=20, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = (nn.functional.cross_entropy(self.classify(standardized), labels)
                    + self.l2 * self.linear.weight.square().sum())
            loss.backward()
            return loss

        with torch.enable_grad():
            optimizer.step(closure)
        return self

    @torch.no_grad()
    def accuracy(self, features: Tensor, labels: Tensor) -> float:
        return (self(features).argmax(-1) == labels).float().mean().item()


def tagging_probe(model: nn.Module, tokenizer, train: list[list[tuple[str, str]]], test: list[list[tuple[str, str]]],
                  layers: tuple[int, ...] = (-1,), seed: int = 0, combine: str = "concat",
                  hide_words: bool = False) -> dict:
    """Accuracy of a linear probe that tags words (e.g. part of speech) from frozen features.

    ``train``/``test``: sentences as lists of (word, tag). Returns the probe's ``accuracy`` on
    ``test`` and, as the floor to beat, ``majority_accuracy``: every word gets its most frequent
    tag in ``train`` (the most frequent tag overall for unseen words). ``combine``: ``"concat"``
    the ``layers``' states, or ``"weighted_sum"`` them with learned weights, then also returned
    as ``layer_weights``. ``hide_words``: tag each word from its context alone (`hidden_word_features`,
    one layer), where the floors are the word's neighbours' most frequent tags (`neighbour_accuracy`):
    ``left_neighbour_accuracy`` from the word before, ``neighbours_accuracy`` from the words on both sides.
    """
    if combine not in ("concat", "weighted_sum"):
        raise ValueError(f"combine must be 'concat' or 'weighted_sum', got {combine!r}")
    if hide_words and (combine != "concat" or len(layers) != 1):
        raise ValueError(f"hide_words reads one layer, concatenated: got layers={layers}, combine={combine!r}")
    stack = combine == "weighted_sum"
    tags = sorted({tag for sentence in train for _, tag in sentence})
    index = {tag: i for i, tag in enumerate(tags)}

    def split(sentences):
        words = [[w for w, _ in s] for s in sentences]
        labels = torch.tensor([index.get(t, -1) for s in sentences for _, t in s])
        features, kept = (hidden_word_features(model, tokenizer, words, layers[0]) if hide_words
                          else word_features(model, tokenizer, words, layers, stack=stack))
        labels = labels[kept]
        known = labels >= 0  # a tag never seen in training cannot be predicted; score it as wrong
        return features, labels, known, kept

    train_x, train_y, train_known, _ = split(train)
    test_x, test_y, _, test_kept = split(test)
    torch.manual_seed(seed)
    probe = LinearProbe(train_x.shape[-1], len(tags), num_layers=len(layers) if stack else None)
    probe.fit(train_x[train_known], train_y[train_known])
    # The baseline scores the same words as the probe: those the model could read.
    flags = iter(test_kept.tolist())
    scored = [[pair for pair in sentence if next(flags)] for sentence in test]
    result = {"accuracy": probe.accuracy(test_x, test_y), "majority_accuracy": majority_accuracy(train, scored)}
    if hide_words:
        result.update(left_neighbour_accuracy=neighbour_accuracy(train, scored, right=False),
                      neighbours_accuracy=neighbour_accuracy(train, scored, right=True))
    if stack:
        result["layer_weights"] = probe.mix.weights.detach().tolist()
    return result


def majority_tags(words: list[list[str]], tags: list[list], sentences: list[list[str]]) -> list[list]:
    """The word-identity baseline: each word of ``sentences`` gets its most frequent tag in the training
    ``words`` / ``tags`` (case ignored), a word never seen the most frequent tag overall."""
    by_word = {}
    for word, tag in zip(chain.from_iterable(words), chain.from_iterable(tags)):
        by_word.setdefault(word.lower(), Counter())[tag] += 1
    overall = Counter(chain.from_iterable(tags)).most_common(1)[0][0]
    return [[by_word[w.lower()].most_common(1)[0][0] if w.lower() in by_word else overall for w in sentence]
            for sentence in sentences]


def majority_accuracy(train: list[list[tuple[str, str]]], test: list[list[tuple[str, str]]]) -> float:
    """The word-identity baseline's accuracy: each word's most frequent training tag (`majority_tags`)."""
    unzip = lambda sentences: ([[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences])
    guessed = majority_tags(*unzip(train), unzip(test)[0])
    pairs = [(g, t) for guesses, sentence in zip(guessed, test) for g, (_, t) in zip(guesses, sentence)]
    return sum(g == t for g, t in pairs) / len(pairs)


def neighbour_accuracy(train: list[list[tuple[str, str]]], test: list[list[tuple[str, str]]],
                       right: bool = True) -> float:
    """A lookup table's accuracy at tagging a word it cannot see: the most frequent tag in ``train``
    between the same left neighbour and, with ``right``, the same right neighbour (backing off to the
    left one alone, then to the most frequent tag overall). The floor of a hidden-word probe."""
    def contexts(sentence):
        words = ["<s>"] + [w.lower() for w, _ in sentence] + ["</s>"]
        return [(words[i], words[i + 2]) for i in range(len(sentence))]  # (left, right) of each word

    both, left = {}, {}
    for sentence in train:
        for (before, after), (_, tag) in zip(contexts(sentence), sentence):
            both.setdefault((before, after), Counter())[tag] += 1
            left.setdefault(before, Counter())[tag] += 1
    overall = Counter(tag for sentence in train for _, tag in sentence).most_common(1)[0][0]
    right_guess = lambda key: both[key].most_common(1)[0][0] if right and key in both else None
    guesses = [right_guess(key) or (left[key[0]].most_common(1)[0][0] if key[0] in left else overall)
               for sentence in test for key in contexts(sentence)]
    tags = [tag for sentence in test for _, tag in sentence]
    return sum(g == t for g, t in zip(guesses, tags)) / len(tags)


@torch.inference_mode()
def sentence_features(model: nn.Module, tokenizer, sentences: list[str], batch_size: int = 64,
                      max_length: int = 128) -> Tensor:
    """(N, H): the mean of the last layer over each sentence's real tokens ([CLS] and [SEP] included).

    The mean rather than [CLS]: a model pre-trained without a sentence-level task (MLM alone, or a
    left-to-right LM, whose [CLS] sees nothing but itself) has no reason to gather the sentence there.
    """
    encoder = getattr(model, "bert", model)
    with eval_mode(encoder):
        device = next(encoder.parameters()).device
        max_length = min(max_length, encoder.config.max_position_embeddings)
        features = []
        for start in range(0, len(sentences), batch_size):
            enc = tokenizer(sentences[start:start + batch_size], truncation=True, max_length=max_length)
            ids, mask = pad_with_mask(enc["input_ids"], tokenizer.pad_token_id)               # (B, T) each
            states = encoder(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state  # (B, T, H)
            weights = mask.to(device, states.dtype)[..., None]                                # (B, T, 1)
            features.append((states * weights).sum(1) / weights.sum(1))                       # (B, H)
    return torch.cat(features).float().cpu()


def sentence_probe(model: nn.Module, tokenizer, train: list[tuple[str, int]], test: list[tuple[str, int]],
                   seed: int = 0) -> dict:
    """Accuracy of a linear classifier on frozen `sentence_features` (e.g. SST-2 sentiment), and the
    majority-class accuracy as the floor to beat. ``train``/``test``: (sentence, label) pairs."""
    train_x = sentence_features(model, tokenizer, [s for s, _ in train])
    test_x = sentence_features(model, tokenizer, [s for s, _ in test])
    train_y, test_y = torch.tensor([y for _, y in train]), torch.tensor([y for _, y in test])
    torch.manual_seed(seed)
    probe = LinearProbe(train_x.shape[-1], int(max(train_y.max(), test_y.max())) + 1).fit(train_x, train_y)
    majority = Counter(train_y.tolist()).most_common(1)[0][0]
    return {"accuracy": probe.accuracy(test_x, test_y), "majority_accuracy": (test_y == majority).float().mean().item()}
