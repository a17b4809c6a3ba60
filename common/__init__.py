"""The bottom layer of every perfq package: the config, the one user-facing error, the version,
and the shared machinery (git, unified diffs, processes, rendering helpers, repository paths,
typed JSON documents). Imports no other perfq package."""
