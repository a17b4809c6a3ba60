"""perfq: connect a PyTorch-style kernel diff to the benchmarks that can see it."""

__version__ = "0.1.0"
