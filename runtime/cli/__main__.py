"""``python -m streamapp.runtime.cli`` — the same as the ``streamapp`` console script."""

import sys

from streamapp.runtime.cli import main

sys.exit(main())
