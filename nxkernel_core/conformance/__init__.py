"""The conformance kit: the Nx_kernel contract's laws, for any kernel library.

Run it as ``pytest --pyargs nxkernel_core.conformance --nxkernel-library NAME``
or ``nxkernel check NAME``. The pytest plugin (``plugin``, registered through
the ``pytest11`` entry point) adds the options, markers and fixtures; the laws
live in the ``test_*`` modules beside it, one function each, registered in
``harness.LAWS`` so that a test can also call them directly
(``harness.run_law``). ``generators`` draws dtypes, shapes, values and layouts;
``nxkernel_core.exact`` holds the exact references.
"""

from __future__ import annotations

__all__: list[str] = []
