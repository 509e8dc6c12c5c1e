"""One rule for every command that writes a folder: a new folder, an empty one, or one minibert wrote.

Each case is a folder a user owns, named as --out by a slip of the keyboard; the command must refuse
before it writes anything, and say which folder and what to do.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from minibert import BertConfig, BertForSequenceClassification
from minibert.cli import main
from minibert.course import slides
from minibert.out_folder import MARK, claim, claimable

pytestmark = pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                                reason="needs the data mirror (MINIBERT_DATA_MIRROR)")


def user_folder(path):
    """A folder of the user's own: a README and an assets/ folder, as a project has."""
    path.mkdir(parents=True)
    (path / "README.md").write_text("my project\n")
    (path / "assets").mkdir()
    (path / "assets" / "logo.svg").write_text("<svg/>")
    return path


def untouched(path):
    return (sorted(p.relative_to(path).as_posix() for p in path.rglob("*")) == ["README.md", "assets", "assets/logo.svg"]
            and (path / "README.md").read_text() == "my project\n")


def test_the_rule_itself(tmp_path):
    assert claimable(tmp_path / "new", "x") == tmp_path / "new" and not (tmp_path / "new").exists()
    assert (claim(tmp_path / "new", "x") / MARK).is_file()
    assert claimable(tmp_path / "new", "x") == tmp_path / "new"  # ours now: may be written again
    (tmp_path / "empty").mkdir()
    assert claimable(tmp_path / "empty", "x") == tmp_path / "empty"
    mine = user_folder(tmp_path / "mine")
    with pytest.raises(ValueError, match=r"x: --out .*mine is a folder that minibert did not write, and it holds "
                                         r"README.md, assets; nothing was written there"):
        claim(mine, "x")
    assert untouched(mine)
    with pytest.raises(ValueError, match="--out is empty"):
        claimable("", "x")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        claimable(tmp_path / "file", "x")


def test_pretrain_and_export_refuse_a_users_folder_and_an_empty_name(tmp_path, capsys, monkeypatch):
    torch.set_num_threads(1)
    mine = user_folder(tmp_path / "mine")
    corpus = ["--corpus", "gutenberg/blake-poems.txt", "--objective", "none", "--vocab-size", "300", "--max-seq-len", "16",
              "--batch-size", "4", "--steps", "2", "--eval-corpus"]
    assert main(["pretrain", "--out", str(mine), *corpus]) == 2
    assert "minibert did not write" in capsys.readouterr().err and untouched(mine)
    monkeypatch.chdir(mine)  # `--out ""` must not mean the current folder
    assert main(["pretrain", "--out", "", *corpus]) == 2
    assert "--out is empty" in capsys.readouterr().err and untouched(mine)
    monkeypatch.chdir(tmp_path)
    assert main(["pretrain", "--out", "run", *corpus]) == 0
    assert (tmp_path / "run" / MARK).is_file()
    assert main(["pretrain", "--out", "run", *corpus, "--steps", "3", "--resume"]) == 0  # its own folder: resumed
    assert main(["export", "run", "--out", str(mine)]) == 2  # `export ... --out .` replaced a README
    assert "minibert did not write" in capsys.readouterr().err and untouched(mine)


def test_finetune_refuses_to_write_over_the_model_it_starts_from(tmp_path, capsys):
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    model_dir = tmp_path / "model"
    BertForSequenceClassification(config).save_pretrained(model_dir)
    (model_dir / MARK).write_text("written by `minibert export`\n")  # a folder minibert wrote, as exports are
    before = (model_dir / "model.safetensors").read_bytes()
    assert main(["finetune", "sst2", "--model", str(model_dir), "--out", str(model_dir)]) == 2
    assert "is the model being fine-tuned" in capsys.readouterr().err
    other = tmp_path / "other-model"
    BertForSequenceClassification(config).save_pretrained(other)
    (other / MARK).write_text("written by `minibert export`\n")
    assert main(["finetune", "sst2", "--model", str(model_dir), "--out", str(other)]) == 2
    assert "holds a model that `minibert finetune` did not write there" in capsys.readouterr().err
    mine = user_folder(tmp_path / "mine")
    assert main(["finetune", "sst2", "--model", str(model_dir), "--out", str(mine)]) == 2
    assert "minibert did not write" in capsys.readouterr().err and untouched(mine)
    assert (model_dir / "model.safetensors").read_bytes() == before
    assert json.loads((model_dir / "config.json").read_text())["num_hidden_layers"] == 1


def test_slides_never_replace_a_users_assets_folder(tmp_path, capsys):
    mine = user_folder(tmp_path / "mine")
    notebook = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("00_*.ipynb"))[0]
    assert slides.main(["build", str(notebook), "--out", str(mine)]) != 0
    assert "minibert did not write" in capsys.readouterr().err and untouched(mine)


def test_a_folder_that_merely_holds_something_minibert_writes_is_still_the_users(tmp_path):
    """The project root holds checkpoints/ (notebook 04's run) beside the user's README: not ours. Nor is a
    folder of the user's that holds only assets/, the name of the slides' assets folder."""
    project = user_folder(tmp_path / "project")
    (project / "checkpoints").mkdir()
    (project / "course.py").write_text("# the user's\n")
    with pytest.raises(ValueError, match=r"project is a folder that minibert did not write, and it holds README.md, assets, course.py"):
        claimable(project, "minibert export")
    only_assets = tmp_path / "only-assets"
    (only_assets / "assets").mkdir(parents=True)
    with pytest.raises(ValueError, match="minibert did not write, and it holds assets"):
        claim(only_assets, "minibert slides")
    # a run folder from before the mark: only what the commands write, and something only they write
    old_run = tmp_path / "old-run"
    for name in ("step-000010", "tokenizer", "checkpoints"):
        (old_run / name).mkdir(parents=True)
    (old_run / "recipe.json").write_text("{}")
    assert claimable(old_run, "minibert pretrain") == old_run
    old_model = tmp_path / "old-model"   # an exported model folder from before the mark: its card is ours
    old_model.mkdir()
    for name in ("config.json", "model.safetensors", "README.md", "held_out.json"):
        (old_model / name).write_text("{}")
    assert claimable(old_model, "minibert export") == old_model


def test_export_into_the_project_root_is_refused_even_with_a_checkpoints_folder(tmp_path, monkeypatch, capsys):
    project = user_folder(tmp_path / "project")
    (project / "checkpoints").mkdir()
    monkeypatch.chdir(project)
    assert main(["export", str(tmp_path / "nowhere"), "--out", "."]) == 2
    assert "minibert did not write" in capsys.readouterr().err
    assert (project / "README.md").read_text() == "my project\n"


# --- inside a folder: only what minibert wrote there is ever replaced -------------------------------------------
NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0[01]_*.ipynb"))


def test_slides_refuse_a_folder_of_the_users_own_slides_and_assets(tmp_path, capsys):
    """`jupyter nbconvert --to slides` writes NAME.slides.html too: a folder of the user's that holds one and an
    assets/ folder is not ours, and `minibert slides --out` it deleted assets/."""
    mine = user_folder(tmp_path / "talk")
    (mine / "README.md").unlink()
    (mine / "talk.slides.html").write_text("<html>my talk</html>")
    assert slides.main(["build", str(NOTEBOOKS[0]), "--out", str(mine)]) != 0
    err = capsys.readouterr().err
    assert "minibert did not write, and it holds assets, talk.slides.html; nothing was written" in err
    assert sorted(p.relative_to(mine).as_posix() for p in mine.rglob("*")) == ["assets", "assets/logo.svg",
                                                                               "talk.slides.html"]


def test_slides_replace_only_the_pages_and_assets_they_wrote(tmp_path, capsys):
    out = tmp_path / "slides"
    assert slides.main(["build", str(NOTEBOOKS[0]), "--out", str(out)]) == 0
    ours = out / f"{NOTEBOOKS[0].stem}.slides.html"
    (out / "notes.txt").write_text("mine")  # beside them: never touched
    assert slides.main(["build", str(NOTEBOOKS[0]), "--out", str(out)]) == 0  # its own page and assets: rebuilt
    theirs = out / f"{NOTEBOOKS[1].stem}.slides.html"  # the user's own page of that notebook (nbconvert's)
    theirs.write_text("<html>my version</html>")
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != ".minibert-lock"}
    capsys.readouterr()
    assert slides.main(["build", *map(str, NOTEBOOKS), "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert f"holds {theirs.name}, which minibert did not write there and this command would replace" in err
    assert "Move it out of the folder, or name another --out" in err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != ".minibert-lock"} == before
    assert theirs.read_text() == "<html>my version</html>" and ours.is_file() and (out / "notes.txt").read_text() == "mine"


def test_a_run_folder_s_own_names_the_user_put_there_are_refused(tmp_path):
    """A folder of ours whose mark does not list a name (the user put history.json there by hand) is not
    written over; what the command wrote there is (its manifest lists it, patterns included)."""
    out = claim(tmp_path / "run", "minibert pretrain", ("tokenizer", "step-*"))
    assert json.loads((out / MARK).read_text())["written"] == ["tokenizer", "step-*"]
    (out / "step-000002").mkdir()
    (out / "history.json").write_text("[]")
    assert claimable(out, "minibert pretrain", ("step-*", "tokenizer")) == out
    with pytest.raises(ValueError, match=r"holds history.json, which minibert did not write there"):
        claimable(out, "minibert pretrain", ("history.json", "step-*"))
    old = tmp_path / "old"  # marked before marks listed names: what minibert writes that is there is its own
    old.mkdir()
    (old / MARK).write_text("written by `minibert slides`: minibert commands may write in this folder again\n")
    (old / "assets").mkdir()
    (old / "00_x.slides.html").write_text("")
    assert claimable(old, "minibert slides", ("assets", "00_x.slides.html")) == old


# --- one command at a time on a folder ---------------------------------------------------------------------------
def small_model(folder):
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("command", ["pretrain", "finetune", "export", "slides", "experiment"])
def test_every_command_that_writes_is_refused_while_another_writes_the_same_out(tmp_path, capsys, command):
    from minibert.out_folder import locked_file, writing
    out = tmp_path / ("results.json" if command == "experiment" else "out")
    argv = {"pretrain": ["pretrain", "--out", str(out), "--corpus", "gutenberg/blake-poems.txt", "--steps", "1"],
            "finetune": ["finetune", "sst2", "--model", str(small_model(tmp_path / "m")), "--out", str(out)],
            "export": ["export", str(small_model(tmp_path / "m")), "--out", str(out)],
            "slides": ["slides", str(NOTEBOOKS[0]), "--out", str(out)],
            "experiment": ["experiment", "masking", "--out", str(out), "--steps", "1"]}[command]
    held = (locked_file(out, "minibert experiment masking") if command == "experiment"
            else writing(out, "minibert test", staged=command == "export"))
    with held:
        started = time.monotonic()
        assert main(argv) != 0
        assert time.monotonic() - started < 30  # refused at once, not after reading data or a model
    err = capsys.readouterr().err
    assert "another minibert command is writing" in err and str(out) in err
    assert f"process {os.getpid()}, `minibert " in err and "Nothing was written" in err


def test_two_pretrain_runs_on_one_folder_the_second_is_refused_and_the_lock_dies_with_its_process(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    flags = ["--corpus", "gutenberg/blake-poems.txt", "--objective", "none", "--vocab-size", "300", "--max-seq-len",
             "16", "--batch-size", "4", "--eval-corpus"]
    first = subprocess.Popen([sys.executable, "-m", "minibert.cli", "pretrain", "--out", str(out), *flags, "--steps",
                              "1000000"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 120
        while not (out / "tokenizer").exists() and time.monotonic() < deadline:  # it is training
            time.sleep(0.2)
        assert (out / "tokenizer").exists(), first.stderr.read() if first.poll() is not None else "no tokenizer"
        assert main(["pretrain", "--out", str(out), *flags, "--steps", "2", "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"another minibert command is writing in {out} (process {first.pid}, `minibert pretrain`)" in err
        assert not list(out.glob("step-*"))
    finally:
        first.kill()  # no chance to clean up: the operating system releases its lock
        first.wait(timeout=60)
    assert main(["pretrain", "--out", str(out), *flags, "--steps", "2", "--resume"]) == 0
    assert (out / "step-000002").is_dir()
