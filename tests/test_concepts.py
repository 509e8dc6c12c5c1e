"""CONCEPTS.md maps every concept the course teaches to the code that implements it: each symbol it
names must import, so the map cannot go stale when code moves."""
import importlib
import re
from pathlib import Path

import pytest

CONCEPTS = Path(__file__).resolve().parents[1] / "CONCEPTS.md"
SYMBOL = re.compile(r"`(minibert(?:\.\w+)*):([\w.]+)`")


def rows() -> list[tuple[str, str, str]]:
    """(paper term, module, attribute path) for every symbol in the table's middle column."""
    found = []
    for line in CONCEPTS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and SYMBOL.search(cells[1]):
            found += [(cells[0], module, attribute) for module, attribute in SYMBOL.findall(cells[1])]
    return found


def test_the_map_is_long_enough_to_be_the_whole_course():
    terms = {term for term, _, _ in rows()}
    assert len(terms) >= 40, f"only {len(terms)} concepts with a symbol"


@pytest.mark.parametrize("term, module, attribute", rows(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_symbol_exists(term, module, attribute):
    obj = importlib.import_module(module)
    for name in attribute.split("."):
        assert hasattr(obj, name), f"CONCEPTS.md, {term!r}: {module}:{attribute} does not exist ({name!r} missing)"
        obj = getattr(obj, name)
