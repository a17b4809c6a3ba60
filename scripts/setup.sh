# shellcheck shell=bash
# Sourced by scripts/demo.sh and scripts/test.sh (from the project root): check everything that
# can fail before the long installs, then install perfq into a virtualenv and put it on PATH.
#
# The virtualenv is the active one ($VIRTUAL_ENV), else the project's .venv, made with
# `python3 -m venv` when missing: the system Python is never installed into. Installs are
# skipped when the same requirements were installed before (a stamp in the venv), so a second
# run starts at once. torch is its CPU build (PERFQ_TORCH_INDEX: where pip finds it when no
# local wheel does; PERFQ_TORCH=skip: no torch).

TORCH_VERSION=2.13.0
MIN_FREE_MB=4000  # the venv with torch (1.3 GB) and the test extras, the corpus with its index (0.3 GB), room

fail() {
  echo "error: $*" >&2
  exit 4
}

note() {
  echo "note: $*" >&2
}

# python3 >= 3.11 with venv and ensurepip (Debian splits them into python3-venv)
check_python() {
  command -v python3 >/dev/null || fail "python3 not found: install Python 3.11 or newer"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || fail "python3 is $(python3 -V 2>&1 | cut -d' ' -f2); perfq needs 3.11 or newer"
  [ -n "${VIRTUAL_ENV:-}" ] || [ -x .venv/bin/python ] || python3 -c 'import venv, ensurepip' 2>/dev/null \
    || fail "python3 cannot make a virtualenv: install python3-venv (Debian/Ubuntu) or activate one"
}

check_tools() {
  local tool
  for tool in git tar xz; do
    command -v "$tool" >/dev/null || fail "$tool not found: install it first"
  done
}

check_disk() {
  local free_mb
  free_mb=$(df -Pm . | awk 'NR == 2 { print $4 }')
  [ "${free_mb:-0}" -ge "$MIN_FREE_MB" ] || fail "only ${free_mb} MB free here; the setup needs about ${MIN_FREE_MB} MB"
}

# the checks of both scripts, before anything is installed or downloaded (the demo also checks the
# corpus fetch: it needs the corpus, the tests skip without it)
preflight() {
  check_python
  check_tools
  check_disk
}

# the active virtualenv, else .venv (created now when missing); exported on PATH
enter_venv() {
  if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -x .venv/bin/python ] || { echo "setup: creating the virtualenv .venv" >&2; python3 -m venv .venv; }
    VIRTUAL_ENV=$PWD/.venv
    export VIRTUAL_ENV
  fi
  PATH=$VIRTUAL_ENV/bin:$PATH
  export PATH
  PY=$VIRTUAL_ENV/bin/python
}

# torch's CPU build: the exact +cpu wheel on Linux x86_64, the plain release elsewhere (CPU-only
# there). A wheel in pip's find-links first (no index asked), else PyTorch's CPU index. Failing is
# a note: torch tests skip and the index links benchmarks statically.
install_torch() {
  local spec="torch==$TORCH_VERSION"
  [ "${PERFQ_TORCH:-}" = skip ] && { note "PERFQ_TORCH=skip: torch not installed"; return 0; }
  [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] && spec="torch==$TORCH_VERSION+cpu"
  if "$PY" -m pip install -q --no-deps --no-index "$spec" >/dev/null 2>&1; then
    "$PY" -m pip install -q "$spec"  # its dependencies, from the usual index
  else
    "$PY" -m pip install -q --retries 1 "$spec" \
        --extra-index-url "${PERFQ_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" \
      || note "$spec not installable here (set PERFQ_TORCH_INDEX or pip's find-links); torch tests skip, benchmarks link statically"
  fi
}

# pip install REQUIREMENT... once: skipped when a stamp of the same requirements and pyproject.toml exists
install_once() {
  local stamp
  stamp="$VIRTUAL_ENV/.perfq-setup-$( (echo "$TORCH_VERSION ${PERFQ_TORCH:-} $*"; cat pyproject.toml) \
    | sha256sum | cut -c1-16)"
  [ -e "$stamp" ] && return 0
  "$PY" -m pip install -q "$@"
  install_torch
  touch "$stamp"
}
