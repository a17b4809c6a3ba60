#!/usr/bin/env bash
# Fetch the PyTorch 2.6.0 source tree (Debian's source package of upstream 2.6.0) and
# make it a one-commit git repository on branch main: perfq's real-world corpus.
#
#   scripts/fetch-pytorch-source.sh [--check] [DEST]
#
# DEST defaults to $PERFQ_CORPUS/pytorch-2.6.0 (PERFQ_CORPUS: ~/.cache/perfq-corpus).
# Reuses an existing checkout. Needs no root: apt's lists, downloads and deb-src entry live in
# $PERFQ_CORPUS/.apt (apt verifies the package's signature with the machine's keyring).
# --check: only check that a fetch can work (exit 4 with one `error:` line if not). Prints DEST last.
set -euo pipefail
version=2.6.0
debian_version="$version+dfsg-7"
corpus=${PERFQ_CORPUS:-$HOME/.cache/perfq-corpus}
check_only=false
if [ "${1:-}" = --check ]; then
  check_only=true
  shift
fi
dest=${1:-$corpus/pytorch-$version}
sources=/etc/apt/sources.list.d/debian.sources
apt_dir=$corpus/.apt

fail() {
  echo "error: fetch-pytorch-source: $*" >&2
  exit 4
}

# a deb-src entry for the Debian release that carries the package, from the machine's own sources
write_deb_src() {
  awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1 {
         gsub(/Types: deb/, "Types: deb-src"); sub(/Suites: [^\n]*/, "Suites: trixie"); print }' "$sources" > "$1"
}

check() {
  if [ -e "$dest" ] && ! git -C "$dest" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    fail "$dest exists and is not a git checkout"
  fi
  command -v apt-get >/dev/null || fail "no apt-get: fetch needs Debian's apt (or put a PyTorch $version tree at $dest)"
  [ -r "$sources" ] || fail "no readable $sources to derive a deb-src entry from"
  { mkdir -p "$corpus" 2>/dev/null && [ -w "$corpus" ]; } || fail "cannot write to $corpus (set PERFQ_CORPUS)"
}

apt_user() {
  apt-get -qq -o Dir::State="$apt_dir" -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status=/dev/null \
    -o Dir::Cache="$apt_dir/cache" -o Dir::Etc::sourcelist="$apt_dir/deb-src.sources" -o Dir::Etc::sourceparts=- \
    -o Dir::Etc::preferencesparts=- "$@"
}

if git -C "$dest" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  $check_only || echo "$dest"
  exit 0
fi
check
$check_only && exit 0
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
write_deb_src "$apt_dir/deb-src.sources"
apt_user update >/dev/null || fail "apt-get update of $apt_dir/deb-src.sources failed"
scratch=$(mktemp -d "$corpus/.fetch.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && apt_user source --download-only "pytorch=$debian_version" >/dev/null) \
  || fail "apt-get source pytorch=$debian_version failed"
tar --no-same-owner -C "$scratch" -xf "$scratch"/pytorch_"$version"+dfsg.orig.tar.xz
mkdir -p "$(dirname "$dest")"
mv "$scratch/pytorch-v$version" "$dest"
git -C "$dest" init -q -b main
git -C "$dest" add -A
git -C "$dest" -c user.name=perfq -c user.email=perfq@localhost commit -q -m "PyTorch $version source"
echo "$dest"
