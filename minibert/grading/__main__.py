"""python -m minibert.grading release | autograde | autograde-class (`minibert.grading.commands`)."""
import sys

from .commands import main

sys.exit(main())
