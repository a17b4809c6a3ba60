#!/usr/bin/env bash
# Fetch the PyTorch 2.6.0 source tree (Debian's source package of upstream 2.6.0) and
# make it a one-commit git repository on branch main: perfq's real-world corpus.
#
#   scripts/fetch-pytorch-source.sh [DEST]
#
# DEST defaults to $PERFQ_CORPUS/pytorch-2.6.0 (PERFQ_CORPUS: ~/.cache/perfq-corpus).
# Reuses an existing checkout. Needs root for apt the first time. Prints DEST last.
set -euo pipefail
version=2.6.0
debian_version="$version+dfsg-7"
corpus=${PERFQ_CORPUS:-$HOME/.cache/perfq-corpus}
dest=${1:-$corpus/pytorch-$version}
if git -C "$dest" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  echo "$dest"
  exit 0
fi
if [ -e "$dest" ]; then
  echo "fetch-pytorch-source: $dest exists and is not a git checkout" >&2
  exit 1
fi
mkdir -p "$corpus"
scratch=$(mktemp -d "$corpus/.fetch.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if ! apt-cache showsrc "pytorch=$debian_version" 2>/dev/null | grep -q "^Version: $debian_version"; then
  # a deb-src list for the Debian release that carries it, from the machine's own sources
  sources=/etc/apt/sources.list.d/debian.sources
  list=/etc/apt/sources.list.d/perfq-deb-src.sources
  [ -f "$sources" ] || { echo "fetch-pytorch-source: no $sources to derive a deb-src entry from" >&2; exit 1; }
  awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1 {
         gsub(/Types: deb/, "Types: deb-src"); sub(/Suites: [^\n]*/, "Suites: trixie"); print }' "$sources" > "$list"
  apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- >/dev/null
fi
(cd "$scratch" && apt-get source --download-only -qq "pytorch=$debian_version" >/dev/null 2>&1)
tar --no-same-owner -C "$scratch" -xf "$scratch"/pytorch_"$version"+dfsg.orig.tar.xz
mkdir -p "$(dirname "$dest")"
mv "$scratch/pytorch-v$version" "$dest"
git -C "$dest" init -q -b main
git -C "$dest" add -A
git -C "$dest" -c user.name=perfq -c user.email=perfq@localhost commit -q -m "PyTorch $version source"
echo "$dest"
