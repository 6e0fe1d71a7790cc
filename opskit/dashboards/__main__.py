"""``python -m opskit.dashboards [--check]``: same as ``opskit dashboards generate``."""

from __future__ import annotations

import sys

from opskit.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["dashboards", "generate", *sys.argv[1:]]))
