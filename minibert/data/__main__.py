"""``python -m minibert.data``: list what exists, fetch it."""
import sys

from . import main

sys.exit(main())
