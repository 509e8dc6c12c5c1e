"""How much of NSP's answer can be read from meaningful sentence vectors? (notebook 04 §6)

Draw NSP pairs as `minibert pretrain --objective nsp` does (WikiText-2 valid to fit, test to score),
encode segment A and segment B *separately* with a real BERT's frozen encoder (MiniLM, mean-pooled),
and tell IsNext from NotNext two ways: the cosine of the two vectors against a threshold fitted on
the training pairs, and a linear probe on [a·b, |a−b|]. A high score says the topic gives NotNext
away; BERT's own NSP head has the harder job of learning that comparison through attention over one
packed pair.

    python benchmarks/nsp_signal.py
"""
from __future__ import annotations

import argparse
import random
import time

import torch

from minibert import BertModel
from minibert.analysis.probing import LinearProbe, sentence_features
from minibert.pretraining import create_sentence_pairs, load_documents, tokenize_documents
from minibert.tokenizer import BertTokenizer


def pair_vectors(model, tokenizer, corpus: str, seed: int, n: int, max_seq_len: int):
    """(features (n, 2H), labels (n,), cosine (n,)) of n NSP pairs drawn from corpus; label 1 = NotNext."""
    documents = tokenize_documents(tokenizer, load_documents(corpus))
    pairs = create_sentence_pairs(documents, max_seq_len, rng=random.Random(seed))
    random.Random(seed).shuffle(pairs)
    pairs = pairs[:n]
    a = sentence_features(model, tokenizer, [tokenizer.decode(first) for first, _, _ in pairs])   # (n, H)
    b = sentence_features(model, tokenizer, [tokenizer.decode(second) for _, second, _ in pairs])  # (n, H)
    labels = torch.tensor([label for _, _, label in pairs])
    return torch.cat([a * b, (a - b).abs()], dim=-1), labels, torch.nn.functional.cosine_similarity(a, b)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--train-pairs", type=int, default=2000)
    parser.add_argument("--test-pairs", type=int, default=1000)
    parser.add_argument("--max-seq-len", type=int, default=128)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.process_time()
    tokenizer, model = BertTokenizer.from_pretrained(args.model), BertModel.from_pretrained(args.model).eval()
    train_x, train_y, train_cos = pair_vectors(model, tokenizer, "wikitext2_raw/wiki.valid.raw", 0,
                                               args.train_pairs, args.max_seq_len)
    test_x, test_y, test_cos = pair_vectors(model, tokenizer, "wikitext2_raw/wiki.test.raw", 1,
                                            args.test_pairs, args.max_seq_len)
    torch.manual_seed(0)
    probe = LinearProbe(train_x.shape[-1], 2).fit(train_x, train_y)
    # NotNext when the two segments are less alike than the threshold that is best on the training pairs
    threshold = max(train_cos.tolist(), key=lambda t: ((train_cos < t) == train_y.bool()).float().mean().item())
    cosine_accuracy = ((test_cos < threshold) == test_y.bool()).float().mean().item()
    print(f"NSP from frozen {args.model} vectors, {len(test_y)} held-out pairs ({test_y.float().mean():.1%} NotNext): "
          f"linear probe {probe.accuracy(test_x, test_y):.1%}, cosine threshold {cosine_accuracy:.1%} "
          f"({time.process_time() - started:.0f} CPU-s)")


if __name__ == "__main__":
    main()
