"""``python -m minibert.cli``: the same commands as ``minibert`` (e.g. under torchrun)."""
import sys

from . import main

sys.exit(main())
