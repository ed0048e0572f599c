"""`python -m kit`: the `parity-kit` command, for an environment whose scripts folder is not on PATH."""

import sys

from kit.cli.entry import main

sys.exit(main())
