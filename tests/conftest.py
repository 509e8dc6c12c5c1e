"""Fixtures shared by the test files."""
import pytest

from offline import minilm_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    """The bert-base-uncased vocabulary (MiniLM's tokenizer, from the Hugging Face cache); a test file
    that needs a toy vocabulary defines its own ``tokenizer``."""
    return minilm_tokenizer()
