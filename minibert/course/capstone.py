"""The student's own BERT from notebook 03b, carried into the notebooks after it.

Notebook 03b, the capstone, ends with a whole BERT the student wrote from plain modules (`MyBert` and
`load_bert_weights`). Every notebook runs in a kernel of its own, so that model would stay in 03b.
`keep` writes the cell that defines it to ``my_bert.py`` beside the notebooks, once it has shown that
it computes what the library's `BertModel` computes; `student_bert` imports it in a later notebook:
04 puts the pre-trained weights of a real BERT into it and fills a blank with the masked-LM loss
written there, 07 fine-tunes it. Until the capstone is solved (or where 03b has not been run) the
library stands in, wrapped to answer as `MyBert` does, so every notebook runs either way.

Nothing of the user's is overwritten: ``my_bert.py`` is replaced only when it carries the mark
that `keep` writes at its top, and it is written to a temporary file first and then renamed, so an
interrupted save leaves the old file whole.
"""
from __future__ import annotations

import importlib.util
import linecache
import os
import tempfile
from pathlib import Path

import torch
from torch import nn

from ..config import BertConfig
from ..model import BertModel

FILE = "my_bert.py"
MARK = "# Written by notebook 03b from your capstone (minibert.course.capstone.keep); its next save replaces it.\n"
# the marks of earlier releases (the capstone was notebook 03's last section): still ours to replace
OUR_MARKS = (MARK, MARK.replace("notebook 03b ", "notebook 03 "))
HEADER = ("import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
          "from minibert import BertConfig\n\n\n")


class LibraryBert(nn.Module):
    """The stand-in: the library's `BertModel` with `MyBert`'s interface, ids -> (sequence, pooled)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.bert = BertModel(config)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        out = self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


def load_library_weights(model: LibraryBert, state_dict: dict) -> None:
    """`load_bert_weights` for the stand-in: the encoder's tensors, with or without ``bert.``, heads left out."""
    model.bert.load_state_dict({name.removeprefix("bert."): tensor for name, tensor in state_dict.items()
                                if not name.startswith("cls.")})


def works(my_bert_class, load_weights) -> str | None:
    """None if the student's model, loaded with a small random BERT's weights, gives that BERT's
    outputs (padding and two segments included); else what went wrong, in a sentence."""
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=16)
    torch.manual_seed(0)
    library = BertModel(config).eval()
    ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    types, mask = torch.zeros_like(ids), torch.ones_like(ids)
    types[:, 3:], mask[1, 4:] = 1, 0
    try:
        mine = my_bert_class(config)
        load_weights(mine, library.state_dict())
        with torch.no_grad():
            sequence, pooled = mine.eval()(ids, types, mask)
            expected = library(ids, attention_mask=mask, token_type_ids=types)
    except NotImplementedError:
        return "the capstone is not solved yet"
    except Exception as e:  # the student's code: whatever it raises is the answer
        return f"it raised {type(e).__name__}: {e}"
    keep = mask.bool()
    if not (torch.allclose(sequence[keep], expected.last_hidden_state[keep], atol=1e-5)
            and torch.allclose(pooled, expected.pooler_output, atol=1e-5)):
        return "its outputs differ from BertModel's"
    return None


def defining_cells(*objects) -> str:
    """The source of the notebook cells that define ``objects`` (functions or classes), each once.

    A class defined in a notebook has no file `inspect` can read, but its methods' code points at the
    cell IPython stored in `linecache`, and so does a function's."""
    files = []
    for obj in objects:
        function = next((f for f in vars(obj).values() if hasattr(f, "__code__")), None) if isinstance(obj, type) \
            else obj
        name = function.__code__.co_filename
        if name not in files:
            files.append(name)
    sources = ["".join(linecache.getlines(name)) for name in files]
    if not all(sources):
        raise OSError("the source of MyBert is not available (define it in a notebook cell, then run it again)")
    return "\n\n".join(source.rstrip() + "\n" for source in sources)


def keep(my_bert_class, load_weights, folder: str | os.PathLike = ".") -> Path | None:
    """Write the cells defining ``my_bert_class`` and ``load_weights`` to ``folder/my_bert.py`` if they
    work (`works`), and return the file; else say why and return None."""
    problem = works(my_bert_class, load_weights)
    target = Path(folder) / FILE
    if problem is None and target.exists() and not target.read_text(errors="replace").startswith(OUR_MARKS):
        problem = f"{target} exists and was not written here; rename it and run this cell again"
    if problem is not None:
        print(f"Your BERT was not saved: {problem}. Notebooks 04 and 07 use the library's BertModel instead.")
        return None
    text = MARK + HEADER + defining_cells(my_bert_class, load_weights)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".my_bert-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)                 # an ordinary file of the user's, not mkstemp's 0600
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    print(f"Your BERT is saved in {target}: notebooks 04 and 07 will use it.")
    return target


def student_bert(folder: str | os.PathLike = ".") -> tuple[type, object, str]:
    """(MyBert, load_bert_weights, whose) from ``folder/my_bert.py`` if notebook 03b saved a working one
    there; else the library's stand-in, with ``whose`` saying which and why."""
    target = Path(folder) / FILE
    if not target.exists():
        return LibraryBert, load_library_weights, "the library's BertModel (notebook 03b's capstone is not saved)"
    try:
        spec = importlib.util.spec_from_file_location("my_bert", target)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        my_bert_class, load_weights = module.MyBert, module.load_bert_weights
    except Exception as e:  # the student's file: any error means "not usable", said plainly
        return LibraryBert, load_library_weights, f"the library's BertModel ({target} failed: {type(e).__name__}: {e})"
    problem = works(my_bert_class, load_weights)
    if problem is not None:
        return LibraryBert, load_library_weights, f"the library's BertModel ({target}: {problem})"
    return my_bert_class, load_weights, f"your MyBert from notebook 03b ({target})"
