"""The gadget operator without webhooks, as a script: ``python gadgets_app.py install``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from install.apps import gadgets

app = gadgets(None)

if __name__ == "__main__":
    app.main()
