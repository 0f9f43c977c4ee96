"""`python -m brook` is the `brook` command."""

import sys

from brook.cli.main import main

sys.exit(main())
