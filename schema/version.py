"""The index schema version: bump it with every change to index.sql (readers refuse others)."""

SCHEMA_VERSION = 14
