"""Programs built on nxkernel, run from a source checkout as modules
(``python -m examples.minilm``); not part of the installed package."""
