"""Fixtures shared by the test files."""
import contextlib

import pytest
from offline import minilm_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    """The bert-base-uncased vocabulary (MiniLM's tokenizer, from the Hugging Face cache); a test file
    that needs a toy vocabulary defines its own ``tokenizer``."""
    return minilm_tokenizer()


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
