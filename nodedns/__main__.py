"""`python -m nodedns` runs the command line."""

from nodedns.cli import main

raise SystemExit(main())
