"""The offline material the tests read (the data mirror, the Hugging Face cache), and what they do
without it: skip on a student's machine, fail in CI, where its absence is a broken setup."""
import os
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

MINILM = "sentence-transformers/all-MiniLM-L6-v2"  # 6 layers, hidden 384, the bert-base-uncased vocabulary


def unavailable(reason):
    """Skip on a machine without the offline material; in CI its absence is a failure."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def mirror_with(relative: str) -> Path:
    """The data mirror (``MINIBERT_DATA_MIRROR``), which must hold the file ``relative``."""
    path = Path(os.environ.get("MINIBERT_DATA_MIRROR", "/nonexistent"))
    if not (path / relative).is_file():
        unavailable(f"no data mirror with {relative} at MINIBERT_DATA_MIRROR={path}")
    return path


def minilm_tokenizer():
    from minibert import BertTokenizer
    try:
        return BertTokenizer.from_pretrained(MINILM)
    except OSError as error:
        unavailable(f"{MINILM} is not in the Hugging Face cache and the Hub is unreachable ({error})")


@contextmanager
def one_torch_thread():
    """Tiny models and batches: a second thread costs more than it saves, above all on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextmanager
def fresh_data_dir(folder, needed: str | None = None):
    """A fresh data folder (``MINIBERT_DATA_DIR``) that the loaders fill from the mirror, which must hold
    ``needed`` when one is named: nothing is written into the checkout."""
    if needed:
        mirror_with(needed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIBERT_DATA_DIR", str(folder))
        yield


def module_fixtures(needed: str):
    """A fine-tuning test module's two fixtures: one torch thread for the whole module (autouse), and
    ``data_home``, a fresh data folder filled from the mirror, which must hold ``needed``.
    Use as ``one_thread, data_home = module_fixtures("sst2/train.tsv")``."""
    @pytest.fixture(scope="module", autouse=True)
    def one_thread():
        with one_torch_thread():
            yield

    return one_thread, fresh_data_fixture(needed, autouse=False)


def fresh_data_fixture(needed: str | None = None, autouse: bool = True):
    """A module's ``data_home`` fixture: its loaders copy from the mirror into a fresh folder, never into the
    checkout's data/ (`fresh_data_dir`). Use as ``data_home = fresh_data_fixture("wikipedia_2015/AA/wiki_02")``."""
    @pytest.fixture(scope="module", autouse=autouse)
    def data_home(tmp_path_factory):
        with fresh_data_dir(tmp_path_factory.mktemp("data"), needed):
            yield

    return data_home
