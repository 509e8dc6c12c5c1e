"""Test-session environment, shared by tests/ and the notebooks that nbval runs.

A classroom or CI machine keeps its offline material in a ``shared/`` folder beside the checkout:
``shared/data`` is a data mirror (see data/README.md) and ``shared/hf-home`` a pre-filled Hugging
Face cache. When they are there and the caller has not chosen otherwise, the tests use them and
stay offline; without them the tests use the network like a student's machine would.
"""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent / "shared"

if (SHARED / "data").is_dir():
    os.environ.setdefault("MINIBERT_DATA_MIRROR", str(SHARED / "data"))
if (SHARED / "hf-home").is_dir() and "HF_HOME" not in os.environ:
    os.environ["HF_HOME"] = str(SHARED / "hf-home")
    os.environ["HF_HUB_OFFLINE"] = "1"
# tokenizers' thread pool stays quiet when nbval's kernels fork. (No MPLBACKEND here: the notebook
# kernels inherit it, and their figures must render inline to be stored.)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items):
    """Running a notebook (nbval executes it cell by cell) is slow; ``-m "not slow"`` leaves it out."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)


def pytest_collectstart(collector):
    """nbval: outputs that differ on every run by construction are not compared (images never are)."""
    if getattr(collector, "fspath", None) is not None and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html", "application/javascript",
                                   "application/vnd.jupyter.widget-view+json")
