"""The hidden-test guards against exercises solved by calling the library's own answer
(minibert.course.integrity), on hand-made solutions defined as a notebook defines them."""
import math

import pytest
import torch
import torch.nn.functional as F

import minibert.attention
import minibert.model
import minibert.tokenizer
from minibert.course.integrity import assert_by_hand, assert_own_modules, forbidden_calls

TOKENIZERS = ("minibert.tokenizer", "tokenizers", "transformers")
ATTENTION = ("minibert.attention", "torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention")


def notebook(source: str) -> dict:
    """The globals of a fresh notebook after running ``source`` in it."""
    namespace = {"__name__": "__main__"}
    exec(source, namespace)
    return namespace


HONEST_WORDPIECE = '''
def wordpiece(word, vocab, unk_token="[UNK]"):
    pieces, start = [], 0
    while start < len(word):
        end = next((e for e in range(len(word), start, -1)
                    if (word[start:e] if start == 0 else "##" + word[start:e]) in vocab), None)
        if end is None:
            return [unk_token]
        pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
        start = end
    return pieces
'''

CHEATS = {
    "the library's function itself": "from minibert.tokenizer import wordpiece",
    "an alias of it": "from minibert.tokenizer import wordpiece as library_wordpiece\n"
                      "def wordpiece(word, vocab):\n    return library_wordpiece(word, vocab)",
    "a module attribute": "import minibert.tokenizer as t\n"
                          "def wordpiece(word, vocab):\n    return t.wordpiece(word, vocab)",
    "a package attribute chain": "import minibert\n"
                                 "def wordpiece(word, vocab):\n    return minibert.tokenizer.wordpiece(word, vocab)",
    "an import in the body": "def wordpiece(word, vocab):\n"
                             "    from minibert.tokenizer import wordpiece as w\n    return w(word, vocab)",
    "importlib with a string": "import importlib\ndef wordpiece(word, vocab):\n"
                               "    return importlib.import_module('minibert.tokenizer').wordpiece(word, vocab)",
    "a helper of the student's": "from minibert.tokenizer import wordpiece as w\n"
                                 "def split(word, vocab):\n    return w(word, vocab)\n"
                                 "def wordpiece(word, vocab):\n    return split(word, vocab)",
    "a lambda": "from minibert.tokenizer import wordpiece as w\nwordpiece = lambda word, vocab: w(word, vocab)",
    "a default argument": "from minibert.tokenizer import wordpiece as w\n"
                          "def wordpiece(word, vocab, split=w):\n    return split(word, vocab)",
    "a class of the notebook": "from minibert.tokenizer import wordpiece as w\n"
                               "class Splitter:\n    def split(self, word, vocab):\n        return w(word, vocab)\n"
                               "def wordpiece(word, vocab):\n    return Splitter().split(word, vocab)",
    "a decorated function": "import functools\nfrom minibert.tokenizer import wordpiece as w\n"
                            "@functools.lru_cache\ndef wordpiece(word, vocab):\n    return w(word, vocab)",
    "the Rust tokenizer": "from tokenizers.models import WordPiece\n"
                          "def wordpiece(word, vocab):\n    return WordPiece(vocab)",
    "transformers": "def wordpiece(word, vocab):\n    import transformers\n"
                    "    return transformers.BertTokenizer(vocab).tokenize(word)",
    "a tokenizer object": "from minibert.tokenizer import BertTokenizer\nfrom minibert.vocabulary import SPECIAL_TOKENS\n"
                          "tok = BertTokenizer({token: i for i, token in enumerate(SPECIAL_TOKENS)})\n"
                          "def wordpiece(word, vocab):\n    return tok.tokenize(word)",
}


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda name: name.replace(" ", "-"))
def test_a_solution_that_calls_the_library_fails(cheat):
    with pytest.raises(AssertionError, match="write it yourself: .*the library's answer") as failure:
        assert_by_hand(notebook(CHEATS[cheat])["wordpiece"], TOKENIZERS, message="split it with your own loop")
    assert str(failure.value).endswith("\nsplit it with your own loop")


def test_the_error_says_where_the_library_is_used():
    with pytest.raises(AssertionError, match=r"wordpiece → split uses minibert\.tokenizer\.wordpiece"):
        assert_by_hand(notebook(CHEATS["a helper of the student's"])["wordpiece"], TOKENIZERS)


def test_an_honest_solution_passes():
    namespace = notebook(HONEST_WORDPIECE)
    assert_by_hand(namespace["wordpiece"], TOKENIZERS)
    assert namespace["wordpiece"]("unaffable", {"un", "##aff", "##able"}) == ["un", "##aff", "##able"]


def test_torch_builtins_and_own_helpers_pass():
    namespace = notebook('''
import math
import torch
import torch.nn.functional as F

def softmax(scores):
    e = (scores - scores.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = softmax(scores) if len(q) > 0 else F.softmax(scores, dim=-1)
    return weights @ v, weights
''')
    assert_by_hand(namespace["scaled_dot_product_attention"], ATTENTION)


def test_names_the_student_shadows_are_their_own():
    """A local variable, or a function of the notebook, named like the library's answer is not it."""
    namespace = notebook('''
def scaled_dot_product_attention(q, k, v, mask=None):
    wordpiece = split_heads = q @ k.transpose(-2, -1)
    scaled_dot_product_attention = wordpiece.softmax(-1)
    return scaled_dot_product_attention @ v, split_heads

def wordpiece(word, vocab):
    return [word] if word in vocab else wordpiece(word[1:], vocab)
''')
    assert_by_hand(namespace["scaled_dot_product_attention"], ATTENTION + TOKENIZERS)
    assert_by_hand(namespace["wordpiece"], TOKENIZERS)


@pytest.mark.parametrize("source", [
    "import torch.nn.functional as F\ndef attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)",
    "from torch.nn.functional import scaled_dot_product_attention as sdpa\n"
    "def attend(q, k, v):\n    return sdpa(q, k, v)",
    "def attend(q, k, v):\n    import torch.nn.functional as G\n    return G.scaled_dot_product_attention(q, k, v)",
    "import torch\ndef attend(q, k, v):\n    return torch.nn.MultiheadAttention(4, 1)(q, k, v)",
    "from minibert.attention import BertSelfAttention\n"
    "def attend(q, k, v):\n    return BertSelfAttention.merge_heads(q)",
], ids=["module-attribute", "alias", "local-import", "class", "library-method"])
def test_forbidden_functions_are_found_however_they_are_named(source):
    with pytest.raises(AssertionError, match="write it yourself"):
        assert_by_hand(notebook(source)["attend"], ATTENTION)


def test_a_forbidden_object_may_be_given_as_it_is():
    attend = notebook("import torch.nn.functional as F\n"
                      "attend = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)")
    with pytest.raises(AssertionError, match="scaled_dot_product_attention"):
        assert_by_hand(attend["attend"], (F.scaled_dot_product_attention,))
    assert_by_hand(attend["attend"], (F.softmax,))


def test_forbidden_calls_refuse_within_the_block_and_restore_after():
    split = minibert.tokenizer.wordpiece  # an alias taken before the block refuses too
    method = minibert.attention.BertSelfAttention.__dict__["merge_heads"]
    kernel = F.scaled_dot_product_attention
    with forbidden_calls("minibert.tokenizer.wordpiece", "torch.nn.functional.scaled_dot_product_attention",
                         "minibert.attention.BertSelfAttention.merge_heads", message="use your own"):
        for call in (lambda: split("ab", {"a", "##b"}), lambda: F.scaled_dot_product_attention(*[torch.ones(1, 2)] * 3),
                     lambda: minibert.attention.BertSelfAttention.merge_heads(torch.ones(1, 1, 1, 1))):
            with pytest.raises(AssertionError, match=r"write it yourself: .* is the library's answer\nuse your own"):
                call()
        assert math.isclose(sum(x * x for x in (3.0, 4.0)), 25.0)  # everything else works
    assert split("ab", {"a", "##b"}) == ["a", "##b"]
    assert F.scaled_dot_product_attention is kernel
    assert minibert.attention.BertSelfAttention.__dict__["merge_heads"] is method


def test_forbidden_calls_restore_when_the_block_raises():
    before = minibert.tokenizer.wordpiece.__code__
    with pytest.raises(ZeroDivisionError):
        with forbidden_calls("minibert.tokenizer.wordpiece", "minibert.tokenizer.wordpiece",  # named twice
                             "torch.nn.Module.__init__"):
            1 / 0  # noqa: B018
    assert minibert.tokenizer.wordpiece.__code__ is before
    assert minibert.tokenizer.wordpiece("ab", {"a", "##b"}) == ["a", "##b"]
    assert torch.nn.Linear(2, 3).weight.shape == (3, 2)  # nn.Module.__init__ is back
    assert "__init__" in vars(torch.nn.Module)


def test_forbidden_calls_report_a_name_that_does_not_exist():
    with pytest.raises(ValueError, match="cannot find minibert.tokenizer.no_such_function"):
        with forbidden_calls("minibert.tokenizer.no_such_function"):
            pass


def test_a_model_of_ones_own_holds_only_torchs_modules_and_the_notebooks():
    """Notebook 03's MyBert: nn.Embedding, nn.Linear, nn.LayerNorm and the notebook's own classes pass; the
    library's BertLayer inside it fails, named."""
    notebook = {"__name__": "__main__", "nn": torch.nn, "minibert": minibert}  # a class as a notebook defines it
    exec("class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
         "        self.norm = nn.LayerNorm(4)\n\n"
         "class Mine(nn.Module):\n    def __init__(self, borrowed=None):\n        super().__init__()\n"
         "        self.blocks = nn.ModuleList([Block(), nn.Linear(4, 4)] + ([borrowed] if borrowed else []))\n",
         notebook)
    assert_own_modules(notebook["Mine"]())
    layer = minibert.model.BertLayer(minibert.config.BertConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16))
    with pytest.raises(AssertionError, match="(?s)Mine holds minibert.model.BertLayer.*wire it yourself"):
        assert_own_modules(notebook["Mine"](layer), message="wire it yourself")
