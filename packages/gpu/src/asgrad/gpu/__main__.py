"""``python -m asgrad.gpu info|coverage [--json]``."""

from asgrad.gpu.cli import main

raise SystemExit(main())
