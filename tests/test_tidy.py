"""The house kept tidy by tools, not by reviewers: ruff's lint and import order on the code, mypy on the
model core, and one version string. The rules live in pyproject.toml; .pre-commit-config.yaml runs the
same checks before a commit."""
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import minibert

ROOT = Path(__file__).resolve().parents[1]


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    done = run("ruff", "check", "--no-cache", "--output-format", "concise")
    assert done.returncode == 0, f"ruff check (fix with `ruff check --fix`, or see pyproject.toml):\n{done.stdout}"


def test_the_model_core_type_checks():
    done = run("mypy", "--no-incremental")
    assert done.returncode == 0, f"mypy on the files [tool.mypy] lists:\n{done.stdout}"
    assert "no issues found in 12 source files" in done.stdout  # the files listed were found and read


def test_one_version_string():
    assert version("minibert") == minibert.__version__  # pyproject.toml reads it from minibert/__init__.py


def test_eval_mode_restores_the_models_mode_even_when_the_block_fails():
    import pytest
    from torch import nn

    from minibert.modes import eval_mode

    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    with eval_mode(model) as inside:
        assert inside is model and not model.training and not model[1].training
    assert model.training and model[1].training
    with pytest.raises(ZeroDivisionError), eval_mode(model):
        1 / 0  # noqa: B018
    assert model.training
    model.eval()
    with eval_mode(model):
        pass
    assert not model.training  # a model handed over in eval mode stays there


def test_one_eval_mode_not_a_copy_in_every_function():
    """Each hand-made `was_training = model.training ... model.train(was_training)` is a chance to forget the
    try/finally (four of them had); `minibert.modes.eval_mode` is the one place that does it."""
    copies = [str(p.relative_to(ROOT)) for p in (ROOT / "minibert").rglob("*.py")
              if p.name != "modes.py" and ".train(was_training)" in p.read_text()]
    assert not copies, f"use minibert.modes.eval_mode in {copies}"


def test_pre_training_data_needs_nothing_from_training():
    done = subprocess.run([sys.executable, "-c", "import sys, minibert.pretraining; "
                           "print(sorted(m for m in sys.modules if m.startswith('minibert.training')))"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
