#!/usr/bin/env bash
# Install perfq with everything its tests use, fetch the PyTorch 2.6.0 corpus for the
# integration tests, and run the whole test suite. Works on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[dev,ir]'
# torch (a local CPU wheel here) for the tests that run generated benchmarks for real
python -m pip install -q torch==2.13.0 || echo "note: torch==2.13.0 not installable; torch tests will skip"
scripts/fetch-pytorch-source.sh >/dev/null || echo "note: corpus not fetched; corpus tests will skip"
# Debian's chromium renders the coverage HTML report in a test; bubblewrap contains traced
# benchmark code (the sandbox tests skip without it); perf samples native stacks (perfq index --native)
missing=""
command -v chromium >/dev/null || missing="$missing chromium"
command -v bwrap >/dev/null || missing="$missing bubblewrap"
command -v perf >/dev/null || missing="$missing linux-perf"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq || true
  for package in $missing; do
    apt-get install -y -qq "$package" >/dev/null || echo "note: $package not installed; its tests will skip"
  done
fi
# architecture and dependencies first: the import contracts of pyproject.toml, declared = imported
lint-imports --no-cache
deptry .
python -m pytest -q "$@"
