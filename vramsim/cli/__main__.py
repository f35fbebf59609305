"""``python -m vramsim.cli``: the ``vramsim`` command without its installed script."""

import sys

from vramsim.cli.main import main

sys.exit(main())
