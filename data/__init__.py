"""perfq's non-code inputs, shipped as package data and read with ``importlib.resources``:
``prelude.h`` (the macros in front of every C++ parse), ``canaries.yaml`` (the default canary
sets) and ``ci/*.yml.in`` (the GitHub Actions workflow templates of ``perfq ci init``)."""
