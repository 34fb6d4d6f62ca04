"""The version of nxkernel: the one place it is written (pyproject.toml reads
it, ``nxkernel --version`` and ``nxkernel_core.__version__`` show it)."""

__version__ = "0.1.0"
