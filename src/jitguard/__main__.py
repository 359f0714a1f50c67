"""``python -m jitguard cache ls | show KEY | stats | clear`` (see ``_src/store/cli.py``).

May import: jitguard._src.store.cli.
"""

import sys

from ._src.store.cli import main

if __name__ == "__main__":
    sys.exit(main())
