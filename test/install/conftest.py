"""The install tests share helpers in installtools.py (tests import with importlib mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
