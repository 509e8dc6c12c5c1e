"""Pre-training data: corpus -> documents -> sentences -> sentence pairs -> masked batches.

BERT learns from unlabeled text by solving two made-up tasks (Devlin et al. 2018, §3.1 and
Appendix A). This package makes their data, step by step, as Google's ``create_pretraining_data.py``
did, with the variations of the papers that came after:

1. `load_documents` (`corpus`; the formats in `text` and `wikipedia`): text -> documents, each a list of
   sentences. Document boundaries matter: the "next sentence" must come from the same document and
   a random one from another. Articles the course evaluates on never reach pre-training.
2. `tokenize_documents` (`corpus`): sentences -> WordPiece ids, in batches with the fast tokenizer;
   at scale `tokenize_corpus` (`tokenized`): the same ids as flat arrays, cached and memory-mapped.
3. Examples of at most ``max_seq_len`` tokens (`pairs`), kept as offsets into the tokens:
   - NSP (BERT): ``[CLS] A [SEP] B [SEP]`` where B follows A (IsNext, label 0) or, half the time,
     comes from another document (NotNext, label 1) -- `create_sentence_pairs`;
   - SOP (ALBERT, Lan et al. 2019): B follows A (label 0) or the two are swapped (label 1) --
     `sentence_order_pairs`;
   - no NSP (RoBERTa FULL-SENTENCES, Liu et al. 2019): ``[CLS] s1 s2 ... [SEP]`` packed with whole
     sentences across documents -- `pack_full_sentences`.
4. `MLMMasking` (`masking`): choose 15% of the tokens; of those, 80% become [MASK], 10% stay the
   SAME and 10% become a RaNDom token; the model must predict the original token at exactly those
   positions. Static (drawn once, like BERT's duplicated data: `mask_statically`) or dynamic (drawn
   anew for every batch, RoBERTa: `mask_dynamically`).

`build_pretraining_data` (`dataset`) does it all and returns a `PretrainingDataset` whose ``collate``
makes the batches that ``BertForPreTraining(**batch)`` or ``BertForMaskedLM(**batch)`` take;
`pretraining_metrics` (`metrics`) reports each objective's loss and accuracy apart.
`fill_in_the_blank_data` is the held-out test (every scored token a [MASK]) and `unigram_loss` the
plateau a model must get below to show that it reads context; `fill_mask` (`fill_mask`) is a trained
model's guesses at the blanks of one sentence.
"""
from .corpus import TEXT_CORPORA, HubDataset, WikiTextAsStored, load_documents, tokenize_documents
from .text import read_text, split_sentences, text_to_sentences, wikitext_to_documents
from .dataset import PretrainingDataset, build_pretraining_data, fill_in_the_blank_data
from .fill_mask import LECTURE_BLANKS, fill_mask
from .masking import BERT_MASK_REPEATS, MLMMasking, mask_dynamically, mask_statically
from .metrics import next_sentence_accuracy, pretraining_metrics, unigram_loss
from .pairs import OBJECTIVES, create_sentence_pairs, pack_full_sentences, sentence_order_pairs
