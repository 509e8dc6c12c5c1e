"""Pre-training data: corpus -> documents -> sentences -> sentence pairs -> masked batches."""
from .pipeline import (OBJECTIVES, TEXT_CORPORA, HubDataset, MLMMasking, PretrainingDataset, _pad,
                       build_pretraining_data, create_sentence_pairs, load_documents, mask_statically,
                       pack_full_sentences, read_text, split_sentences, text_to_sentences, tokenize_documents,
                       wikitext_to_documents)
