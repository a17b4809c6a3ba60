"""perfq's version: the bottom layer holds it, so the index's build digests read it without
importing the perfq package above them."""

__version__ = "0.1.0"
