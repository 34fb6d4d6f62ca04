"""``python -m nxkernel_core``: the ``nxkernel`` command."""

from .cli import main

raise SystemExit(main())
