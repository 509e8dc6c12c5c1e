"""Fixtures shared by the test files."""
import contextlib

import pytest
from offline import minilm_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    """The bert-base-uncased vocabulary (MiniLM's tokenizer, from the Hugging Face cache); a test file
    that needs a toy vocabulary defines its own ``tokenizer``."""
    return minilm_tokenizer()


@pytest.fixture(scope="session")
def eval_text(tmp_path_factory):
    """A held-out text of two short documents (sentence pairs can be drawn from it), for pre-training runs."""
    folder = tmp_path_factory.mktemp("eval")
    (folder / "river.txt").write_text(
        "The river rose after the storm. Farmers moved their animals to higher ground.\n\n"
        "Nobody expected the bridge to hold. It did, and the town was grateful.\n")
    (folder / "mill.txt").write_text(
        "The old mill stood by the water. Its wheel had not turned in years.\n\n"
        "Children played on the bank in summer. In winter the ice was thick.\n")
    return str(folder)


@pytest.fixture
def killed_after_saving(monkeypatch):
    """``with killed_after_saving():`` a run inside is stopped (KeyboardInterrupt, as a kill mid-run) right
    after it writes its first checkpoint, before the end of the call that writes its full record."""
    import minibert.training.trainer as trainer_module
    real_save = trainer_module.Trainer.save_checkpoint

    def save_then_die(self):
        real_save(self)
        raise KeyboardInterrupt("killed")

    @contextlib.contextmanager
    def killed():
        with monkeypatch.context() as patch:
            patch.setattr(trainer_module.Trainer, "save_checkpoint", save_then_die)
            yield
    return killed
