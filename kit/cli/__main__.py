"""`python -m kit.cli`: the `parity-kit` command, as a module (kit's own runs of it, a checkout without the
console script)."""

import sys

from kit.cli.entry import main

sys.exit(main())
