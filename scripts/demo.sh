#!/usr/bin/env bash
# Set up perfq and run its main job on a real tree: index PyTorch 2.6.0, then ask which
# benchmarks a one-line kernel change selects (a diff, the corpus untouched), with the chain.
# No root needed; perfq goes into the active virtualenv or .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
preflight
scripts/fetch-pytorch-source.sh --check
enter_venv
# torch (the CPU wheel) lets `perfq index` trace what each benchmark test executes, the
# selection's first source of truth; without it the index links benchmarks statically
# expecttest: torch.testing._internal imports it, and so do benchmarks that import that (fill_test)
install_once -e . expecttest
corpus=$(scripts/fetch-pytorch-source.sh | tail -n 1)
perfq index --repo "$corpus"
perfq stats --repo "$corpus"
# a one-line edit in a vectorized softmax helper (line 168 of the 2.6.0 file), made on a copy
# (the corpus stays untouched, nothing is checked out) and given to perfq as a git diff
kernel=aten/src/ATen/native/cpu/SoftMaxKernel.cpp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a/$(dirname "$kernel")" "$work/b/$(dirname "$kernel")"
git -C "$corpus" show "main:$kernel" > "$work/a/$kernel"
sed '168s/input_data + d0/input_data + d0 + 0/' "$work/a/$kernel" > "$work/b/$kernel"
(cd "$work" && git diff --no-index --no-prefix "a/$kernel" "b/$kernel" > change.diff) || [ $? = 1 ]  # 1: they differ
(cd "$corpus" && perfq affected --diff - --explain < "$work/change.diff")
