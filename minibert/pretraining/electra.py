"""ELECTRA's replaced token detection (Clark et al. 2020): pre-train a discriminator, not a generator.

A masked LM learns only at the ~15% of positions it is asked to fill in, and it learns around
[MASK], a token it never meets again once fine-tuning starts. ELECTRA keeps the masking but gives
the blanks to a small *generator* (a masked LM a quarter of the width), fills each blank with a
token *sampled* from the generator's guesses, and trains the encoder it keeps, the
*discriminator*, to say at every token whether it is the original or a replacement. So the
encoder gets a training signal at every position, from text that looks like text (no [MASK]), and
the replacements are plausible words, hard to tell from the real ones. The paper finds this
learns more per unit of compute than BERT's masked LM, the more so the smaller the model (ELECTRA-
Small, 14M parameters, beats a BERT-Small trained with the same compute by 4.8 GLUE points, §3.3).

The pieces, as the paper and its released code have them:

- the generator's input: 15% of the tokens chosen, 85% of those [MASK], 15% left as they are
  (`electra_masking`; the code's ``pretrain_helpers.mask``, no random tokens);
- the generator: a `BertForMaskedLM` of the discriminator's depth, a quarter of its hidden size
  (`generator_config`), sharing the discriminator's token, position and segment embeddings (§3.2:
  tying them helps; the generator's own E → H_g projection sits in front of its layers);
- sampling: one token per blank from softmax(logits), by the Gumbel-max trick; no gradient flows
  back through it (the discriminator's loss does not train the generator: that would be a GAN,
  which the paper tried and found worse, §3.2);
- the discriminator's labels: 1 where the token differs from the original, 0 elsewhere, so a
  sample that *is* the original counts as original; scored at every token but padding and the
  special ones (`ElectraData`; the released code also scores [CLS] and [SEP], which are never
  replaced, so the two differ only by easy zeros);
- the loss: generator MLM loss + λ · discriminator loss, λ = 50, the paper's choice: a binary
  cross-entropy near 0.4 nats beside a generator's 5 or more would otherwise barely count.

Measured at the course's size (`minibert.experiments.electra`, notebook 11): at a few million tokens
the discriminator has not yet left its own plateau (always answering the share of replaced tokens),
and the masked LM's encoder is far ahead; the paper's small model read thousands of times more text.

After pre-training the generator is thrown away; the discriminator's encoder (``model.bert``) is
a plain BERT, saved with `ElectraForPreTraining.save_discriminator` for anyone to fine-tune.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ACT2FN, BertConfig
from ..heads import IGNORE_INDEX, BertForMaskedLM, masked_lm_positions
from ..model import BertModel, BertPreTrainedModel
from .dataset import PretrainingDataset
from .masking import MLMMasking
from .metrics import pretraining_metrics

GENERATOR_FRACTION = 0.25       # generator hidden size / discriminator's (ELECTRA-Small 1/4, Base 1/3; Table 6)
RTD_WEIGHT = 50.0               # λ, the discriminator loss's weight (§3.1, the released code's disc_weight)
ELECTRA_MASK_SAME_RND = (0.85, 0.15, 0.0)  # of the chosen 15%: [MASK], left as they are, random (none)


def generator_config(config: BertConfig, fraction: float = GENERATOR_FRACTION) -> BertConfig:
    """The generator's size: the discriminator's depth, ``fraction`` of its hidden size, heads of 64
    dimensions (at least one) and a 4H feed-forward layer, as the released code sizes it. Its
    embeddings stay the discriminator's width E, since they are the same tables; a linear E → H_g
    (ALBERT's factorised-embedding projection) brings them to the generator's width."""
    if not 0 < fraction <= 1:
        raise ValueError(f"the generator's fraction of the discriminator's hidden size must be in (0, 1], "
                         f"got {fraction!r} (the paper: 1/4 to 1/2 works best, Figure 3)")
    hidden = max(1, round(config.hidden_size * fraction))
    return config.replace(hidden_size=hidden, num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
                          embedding_size=config.embedding_dim, pruned_heads={}, is_decoder=False)


def electra_masking(tokenizer, mlm_probability: float = 0.15) -> MLMMasking:
    """The generator's blanks: 15% of the tokens, 85% of them [MASK] and 15% left as they are."""
    return MLMMasking(tokenizer, mlm_probability, ELECTRA_MASK_SAME_RND)


class ElectraData(PretrainingDataset):
    """Pre-training examples as ELECTRA reads them: the masked batch of `PretrainingDataset` (default
    masking `electra_masking`), plus ``replaceable`` (B, T): the tokens the discriminator is scored on,
    every one the masking could have chosen (neither padding nor a special token). The data knows
    which tokens are special; the model, as every model here, knows nothing of the tokenizer."""

    @classmethod
    def from_tokenizer(cls, examples, tokenizer, mlm_probability: float = 0.15) -> "ElectraData":
        return cls(examples, electra_masking(tokenizer, mlm_probability))

    def collate(self, examples: list[dict]) -> dict[str, Tensor]:
        batch = super().collate(examples)
        labels = batch["labels"]
        original = torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])       # (B, T) before masking
        batch["replaceable"] = ~self.masking.special[original] & batch["attention_mask"].bool()  # (B, T)
        return batch


class ReplacedTokenDetectionHead(nn.Module):
    """Per token, one logit: replaced (> 0) or original. Dense H → H, the activation, dense H → 1
    (the released code's ``discriminator_predictions``)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T, H) -> (B, T)


@dataclass
class ElectraOutput:
    loss: Tensor | None                          # generator MLM loss + λ · discriminator loss
    mlm_loss: Tensor | None                      # the generator's masked-LM cross-entropy
    rtd_loss: Tensor | None                      # the discriminator's binary cross-entropy over scored tokens
    rtd_logits: Tensor                           # (B, T): > 0 says "replaced"
    rtd_labels: Tensor                           # (B, T): 1 replaced, 0 original, -100 not scored
    corrupted_ids: Tensor                        # (B, T): what the discriminator read
    logits: Tensor | None = None                 # (B, T, V) generator scores; None with masked_only
    masked_logits: Tensor | None = None          # (N_masked, V) generator scores at the masked positions, row-major
    hidden_states: tuple[Tensor, ...] | None = None  # the discriminator's
    attentions: tuple[Tensor, ...] | None = None


def sample_tokens(logits: Tensor) -> Tensor:
    """(N, V) scores -> (N,) one token drawn from softmax(logits) for each row, by the Gumbel-max trick:
    argmax(logits + G) with G = -log(-log U) is a sample (the released code's ``sample_from_softmax``).
    The draw comes from torch's generator, which the Trainer seeds and saves in its checkpoints."""
    noise = torch.rand(logits.shape, device=logits.device)                    # U in [0, 1); U = 0 gives -inf
    return (logits.detach().float() - torch.log(-torch.log(noise))).argmax(-1)


class ElectraForPreTraining(BertPreTrainedModel):
    """Generator and discriminator, trained together: ``model(**batch).loss`` as for the other
    objectives, so `Trainer` and `make_trainer` train it unchanged (batches from `ElectraData`).

    ``bert``: the discriminator's encoder, the model kept afterwards (probes read ``model.bert``);
    ``discriminator_predictions``: the replaced-token head; ``generator``: a small `BertForMaskedLM`
    whose ``bert.embeddings`` *is* ``bert.embeddings`` (one module, one set of tables).
    ``config`` is the discriminator's.
    """

    def __init__(self, config: BertConfig, generator_fraction: float = GENERATOR_FRACTION,
                 rtd_weight: float = RTD_WEIGHT):
        super().__init__()
        if config.is_decoder:
            raise ValueError("ELECTRA's discriminator reads the whole corrupted sentence: is_decoder must be False")
        self.config, self.rtd_weight = config, rtd_weight
        self.bert = BertModel(config, add_pooling_layer=False)
        self.discriminator_predictions = ReplacedTokenDetectionHead(config)
        self.generator = BertForMaskedLM(generator_config(config, generator_fraction))
        self.init_weights()

    def tie_weights(self) -> None:
        """Share the embeddings (token, position, segment, their LayerNorm) with the generator, and tie
        the generator's MLM decoder to the shared token table (§3.2's "tied token embeddings")."""
        self.generator.bert.embeddings = self.bert.embeddings
        self.generator.tie_weights()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                labels: Tensor | None = None, replaceable: Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, masked_only: bool = False,
                masked_positions: Tensor | None = None) -> ElectraOutput:
        """``input_ids``: the masked text (B, T); ``labels``: the original token where masked, -100 elsewhere
        (`ElectraData` makes both); ``replaceable`` (B, T): the tokens the discriminator is scored on
        (None: every non-padding token, as the released code scores). ``masked_only`` / ``masked_positions``:
        the generator's decoder runs at the masked positions only (`minibert.heads.masked_lm`)."""
        if labels is None:
            raise ValueError("ELECTRA learns from masked text: pass labels (the original token at each masked "
                             "position, -100 elsewhere), as ElectraData.collate makes them")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        # 1. The generator fills in the blanks, a masked LM trained as BERT's.
        generated = self.generator(input_ids, attention_mask, token_type_ids, labels=labels, masked_only=masked_only,
                                   masked_positions=masked_positions)
        if masked_only or masked_positions is not None:
            if masked_positions is None:
                masked_positions = masked_lm_positions(labels)                         # (N_masked,) flat indices
            masked_logits = generated.masked_logits                                   # (N_masked, V)
        else:
            masked_positions = masked_lm_positions(labels)
            masked_logits = generated.logits.flatten(0, 1).index_select(0, masked_positions)
        # 2. A token sampled at each blank (no gradient through the sample) goes into the original text.
        original = torch.where(labels != IGNORE_INDEX, labels, input_ids)              # (B, T)
        corrupted = original.flatten().index_copy(0, masked_positions, sample_tokens(masked_logits))
        corrupted = corrupted.view_as(original)                                        # (B, T)
        # 3. The discriminator reads it and says at every token: replaced or original. A sample that
        #    happens to be the original token is the original (the paper's labels).
        out = self.bert(corrupted, attention_mask, token_type_ids, output_attentions, output_hidden_states)
        rtd_logits = self.discriminator_predictions(out.last_hidden_state)             # (B, T)
        replaced = (corrupted != original).float()                                     # (B, T)
        scored = (attention_mask.bool() if replaceable is None else replaceable.bool() & attention_mask.bool())
        weights = scored.float()                                                       # (B, T) 1 where scored
        per_token = F.binary_cross_entropy_with_logits(rtd_logits.float(), replaced, reduction="none")
        rtd_loss = (per_token * weights).sum() / weights.sum().clamp_min(1)            # mean over scored tokens
        loss = generated.loss + self.rtd_weight * rtd_loss
        rtd_labels = replaced.long().masked_fill(~scored, IGNORE_INDEX)
        return ElectraOutput(loss, generated.loss, rtd_loss, rtd_logits, rtd_labels, corrupted,
                             logits=generated.logits, masked_logits=masked_logits,
                             hidden_states=out.hidden_states, attentions=out.attentions)

    def save_discriminator(self, directory: str | os.PathLike) -> Path:
        """The discriminator's encoder as a plain `BertModel` folder (config.json + model.safetensors), which
        ``BertModel.from_pretrained`` and transformers read; it has no pooler, as a masked LM's encoder has none."""
        return self.bert.save_pretrained(directory)


def electra_metrics(outputs: ElectraOutput, batch: dict) -> dict[str, float]:
    """The generator's MLM figures (`pretraining_metrics`), and the discriminator's: its loss, its
    accuracy over the scored tokens, and the share of them that were replaced (the generator's
    samples that differed from the original: a generator that guesses well replaces fewer)."""
    metrics = pretraining_metrics(outputs, batch)
    scored = outputs.rtd_labels != IGNORE_INDEX                                        # (B, T)
    said = (outputs.rtd_logits > 0).long()
    replaced = outputs.rtd_labels[scored]
    metrics.update(rtd_loss=outputs.rtd_loss.detach().item(), rtd_accuracy=(said[scored] == replaced).float().mean().item(),
                   replaced_share=replaced.float().mean().item())
    return metrics
