"""perfq: connect a PyTorch-style kernel diff to the benchmarks that can see it."""

from common.version import __version__ as __version__  # the bottom layer's, re-exported
