"""Notebook 03b, the capstone: the student's own BERT, graded by its own test cells: run here directly (no
nbgrader, seconds) in a namespace built as the notebook builds it, with the instructor's solution and
with answers that must not pass: a model that wraps the library, one that calls it by a back door, wiring
bugs (each told where it first differs, its loader still graded on its own), and loaders that forget the
file, eval mode, or let transformers do the reading. nbgrader's own autograde of the
whole notebook (full marks for the solutions, zero for the release) is in test_grading.py."""
from pathlib import Path

import nbformat
import pytest
from offline import minilm_tokenizer

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03b_capstone.ipynb"


def cells() -> dict[str, str]:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    named = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if "grade_id" in c.metadata.get("nbgrader", {})}
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    named["parameters"] = code[0]
    named["setup"] = "\n".join(line for line in code[1].splitlines() if not line.startswith("%"))
    return named


@pytest.fixture(scope="module")
def notebook() -> dict[str, str]:
    minilm_tokenizer()  # MiniLM in the Hub cache, or a skip (a failure in CI)
    return cells()


def kernel(notebook) -> dict:
    """A namespace holding what the notebook has defined before the capstone."""
    namespace = {"__name__": "__main__"}
    exec(notebook["parameters"], namespace)
    exec(notebook["setup"], namespace)
    exec("from huggingface_hub import hf_hub_download", namespace)
    return namespace


def grade(notebook, **answers) -> dict[str, str | None]:
    """Each test cell of the capstone run after its solution cell (the instructor's, unless ``answers``
    replaces it): None where it passed, else the error it raised."""
    namespace, outcome = kernel(notebook), {}
    for solution, tests in [("ex03b_my_bert", "ex03b_my_bert_tests"), ("ex03b_my_minilm", "ex03b_my_minilm_tests")]:
        exec(answers.get(solution, notebook[solution]), namespace)
        try:
            exec(notebook[tests], namespace)
            outcome[tests] = None
        except Exception as e:  # noqa: BLE001 - a test cell fails on any error, as under nbgrader
            outcome[tests] = f"{type(e).__name__}: {e}"
    return outcome


def test_the_solutions_pass_every_test_of_the_capstone(notebook):
    assert grade(notebook) == {"ex03b_my_bert_tests": None, "ex03b_my_minilm_tests": None}


def test_a_bert_that_wraps_the_library_gets_nothing(notebook):
    wrapped = notebook["ex03b_my_bert"].replace("class MyBert(nn.Module):", "class _Honest(nn.Module):") + """

class MyBert(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.inner = BertModel(config)
        self.layers = self.inner.encoder.layer

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        out = self.inner(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        return out.last_hidden_state, out.pooler_output


def load_bert_weights(my_bert, state_dict):
    my_bert.inner.load_state_dict({k.removeprefix("bert."): v for k, v in state_dict.items()}, strict=False)
"""
    outcome = grade(notebook, ex03b_my_bert=wrapped)
    assert outcome["ex03b_my_bert_tests"].startswith("AssertionError") and "minibert.model" in outcome["ex03b_my_bert_tests"]


def test_a_back_door_to_the_library_is_refused(notebook):
    """Honest parameters and loader, but the arithmetic handed to the library's BertModel, found by a name
    built at run time (no reading of the code can see it): the library's forward raises while the tests run."""
    back_door = notebook["ex03b_my_bert"] + """

_Honest, _honest_load = MyBert, load_bert_weights


class MyBert(_Honest):
    def __init__(self, config):
        super().__init__(config)
        self.stashed = (config, None)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        import importlib
        library = getattr(importlib.import_module("mini" + "bert"), "Bert" + "Model")
        shadow = library(self.stashed[0]).eval()
        shadow.load_state_dict(self.stashed[1], strict=False)
        out = shadow(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        return out.last_hidden_state, out.pooler_output


def load_bert_weights(my_bert, state_dict):
    _honest_load(my_bert, state_dict)
    kept = {k.removeprefix("bert."): v for k, v in state_dict.items() if not k.startswith("cls.")}
    my_bert.stashed = (my_bert.stashed[0], kept)
"""
    outcome = grade(notebook, ex03b_my_bert=back_door)
    assert outcome["ex03b_my_bert_tests"].startswith("AssertionError: write it yourself")


WIRING_BUGS = {  # a bug of the capstone -> (the solution's line, the buggy line, what the feedback must name)
    "pre-LN": ('x = layer["norm1"](x + layer["o"](context))\n            x = layer["norm2"](x + layer["ff2"](F.gelu(layer["ff1"](x))))',
               'x = x + layer["o"](context)\n            x = layer["norm2"](x + layer["ff2"](F.gelu(layer["ff1"](layer["norm1"](x)))))',
               "the embeddings agree; layer 1 of 2 is the first that differs"),
    "positions off by one": ("positions = torch.arange(T, device=input_ids.device)",
                             "positions = torch.arange(1, T + 1, device=input_ids.device)",
                             "the embeddings already differ"),
    "segments ignored": ("+ self.segment(token_type_ids))", "+ self.segment(torch.zeros_like(token_type_ids)))",
                         "with two segments (token_type_ids 0 and 1), though it agrees with one"),
    "no padding mask": (".masked_fill(~keep, torch.finfo(x.dtype).min)", "", "with padding, though it agrees without"),
    "pooler on the mean": ("return x, torch.tanh(self.pooler(x[:, 0]))", "return x, torch.tanh(self.pooler(x.mean(1)))",
                           "every layer agrees; the pooled output differs"),
}


@pytest.mark.parametrize("bug", WIRING_BUGS)
def test_a_wrong_capstone_is_told_where_it_first_differs_and_its_loader_still_counts(notebook, bug):
    """The feedback names the first part that differs, not only "max |difference| 2.4"; and the loading
    exercise after it is graded on its own: a correct loader keeps its points beside a wrong model."""
    right, wrong, named = WIRING_BUGS[bug]
    buggy = notebook["ex03b_my_bert"].replace(right, wrong)
    assert buggy != notebook["ex03b_my_bert"]
    outcome = grade(notebook, ex03b_my_bert=buggy)
    assert outcome["ex03b_my_bert_tests"] is not None and named in outcome["ex03b_my_bert_tests"], outcome
    assert outcome["ex03b_my_minilm_tests"] is None, outcome


def test_a_loader_that_forgets_eval_mode_or_the_file_loses_its_own_points(notebook):
    no_eval = notebook["ex03b_my_minilm"].replace("return my_bert.eval()", "return my_bert")
    assert grade(notebook, ex03b_my_minilm=no_eval)["ex03b_my_minilm_tests"].startswith("AssertionError: return the model in eval")
    random_weights = notebook["ex03b_my_minilm"].replace(
        'load_bert_weights(my_bert, load_file(Path(folder) / "model.safetensors"))', "")
    outcome = grade(notebook, ex03b_my_minilm=random_weights)
    assert "not the folder's tensor" in outcome["ex03b_my_minilm_tests"], outcome


def test_a_loader_that_lets_transformers_read_the_folder_gets_nothing(notebook):
    borrowed = notebook["ex03b_my_minilm"].replace(
        'load_bert_weights(my_bert, load_file(Path(folder) / "model.safetensors"))',
        'load_bert_weights(my_bert, transformers.BertModel.from_pretrained(folder).state_dict())')
    assert borrowed != notebook["ex03b_my_minilm"]
    outcome = grade(notebook, ex03b_my_minilm=borrowed)
    assert outcome["ex03b_my_bert_tests"] is None
    assert outcome["ex03b_my_minilm_tests"].startswith("AssertionError: write it yourself")


# --- the student's BERT carried into notebooks 04 and 07 (minibert.course.capstone) -------------------

def as_a_cell(source: str, namespace: dict, name: str = "<cell-59>") -> None:
    """Run ``source`` as IPython runs a cell: compiled under a name of its own whose lines `linecache` holds."""
    import linecache

    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), namespace)


def test_the_capstone_is_kept_and_comes_back_as_the_students_own(notebook, tmp_path, capsys):
    from minibert.course.capstone import MARK, keep, student_bert

    namespace = kernel(notebook)
    as_a_cell(notebook["ex03b_my_bert"], namespace)
    saved = keep(namespace["MyBert"], namespace["load_bert_weights"], tmp_path)
    assert saved == tmp_path / "my_bert.py" and saved.read_text().startswith(MARK)
    assert "class MyBert" in saved.read_text() and "def load_bert_weights" in saved.read_text()
    my_bert_class, load_weights, whose = student_bert(tmp_path)
    assert whose.startswith("your MyBert") and my_bert_class.__module__ == "my_bert"
    assert "notebooks 04 and 07 will use it" in capsys.readouterr().out


def test_an_unsolved_or_broken_capstone_leaves_the_library_standing_in(notebook, tmp_path, capsys):
    from minibert.course.capstone import LibraryBert, keep, student_bert

    unsolved = ("class MyBert(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
                "        raise NotImplementedError()\n\n\ndef load_bert_weights(my_bert, state_dict):\n"
                "    raise NotImplementedError()\n")                       # what the student release holds
    namespace = kernel(notebook)
    as_a_cell(unsolved, namespace, "<cell-unsolved>")
    assert keep(namespace["MyBert"], namespace["load_bert_weights"], tmp_path) is None
    assert "not solved yet" in capsys.readouterr().out and not (tmp_path / "my_bert.py").exists()
    assert student_bert(tmp_path)[0] is LibraryBert
    (tmp_path / "my_bert.py").write_text("import nowhere_to_be_found\n")
    my_bert_class, _, whose = student_bert(tmp_path)
    assert my_bert_class is LibraryBert and "my_bert.py failed: ModuleNotFoundError" in whose


def test_keeping_never_overwrites_a_file_it_did_not_write(notebook, tmp_path, capsys):
    from minibert.course.capstone import keep

    mine = tmp_path / "my_bert.py"
    mine.write_text("# my own experiments\n")
    namespace = kernel(notebook)
    as_a_cell(notebook["ex03b_my_bert"], namespace)
    assert keep(namespace["MyBert"], namespace["load_bert_weights"], tmp_path) is None
    assert mine.read_text() == "# my own experiments\n"
    assert "exists and was not written here" in capsys.readouterr().out


def test_the_stand_in_answers_as_mybert_does():
    import torch

    from minibert import BertConfig, BertForPreTraining, BertModel
    from minibert.course.capstone import LibraryBert, load_library_weights

    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=8)
    torch.manual_seed(0)
    pretraining = BertForPreTraining(config).eval()
    stand_in = LibraryBert(config).eval()
    load_library_weights(stand_in, pretraining.state_dict())   # "bert." names and "cls." heads, as MyBert reads
    ids = torch.randint(0, 40, (2, 5))
    sequence, pooled = stand_in(ids)
    expected = pretraining.bert(ids)
    assert torch.equal(sequence, expected.last_hidden_state) and torch.equal(pooled, expected.pooler_output)
    assert isinstance(stand_in.bert, BertModel)


def test_a_release_never_carries_a_saved_capstone(tmp_path):
    """Notebook 03 run by the instructor saves the solution as my_bert.py: the student release leaves it out."""
    import shutil

    from minibert import grading

    source = tmp_path / "source"
    shutil.copytree(Path(__file__).parent / "fixtures" / "grading", source)
    (source / "my_bert.py").write_text("# the instructor's solution\n")
    released = grading.release(source, tmp_path / "out")
    assert (released / "01_demo.ipynb").exists() and not (released / "my_bert.py").exists()
