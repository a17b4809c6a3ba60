"""Shared machinery of every perfq layer: git, unified diffs, processes, rendering helpers,
repository paths and typed JSON documents. Imports nothing of perfq but ``common.errors``."""
