#!/usr/bin/env bash
# Install perfq with everything its tests use, fetch the PyTorch 2.6.0 corpus for the
# integration tests, and run the whole test suite. Works on a fresh machine, root or not;
# perfq goes into the active virtualenv or .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
preflight
enter_venv
# torch (a CPU wheel) for the tests that run generated benchmarks for real
install_once -e '.[dev,ir]'
scripts/fetch-pytorch-source.sh >/dev/null || note "corpus not fetched; corpus tests will skip"
# Debian's chromium renders the coverage HTML report in a test; bubblewrap contains traced
# benchmark code (the sandbox tests skip without it); perf samples native stacks (perfq index --native);
# ccache: the emulated CI build job compiles a C++ extension twice through it
missing=""
command -v chromium >/dev/null || missing="$missing chromium"
command -v bwrap >/dev/null || missing="$missing bubblewrap"
command -v perf >/dev/null || missing="$missing linux-perf"
command -v ccache >/dev/null || missing="$missing ccache"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq || true
    for package in $missing; do
      apt-get install -y -qq "$package" >/dev/null || note "$package not installed; its tests will skip"
    done
  else
    note "not root: not installing$missing; their tests will skip"
  fi
fi
# architecture and dependencies first: the import contracts of pyproject.toml, declared = imported
lint-imports --no-cache
deptry .
python -m pytest -q "$@"
