#!/usr/bin/env bash
# Set up perfq and run its main job on a real tree: index PyTorch 2.6.0, then ask which
# benchmarks a one-line kernel change selects (in a scratch worktree), with the chain.
# No root needed; perfq goes into the active virtualenv or .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
preflight
enter_venv
# torch (the CPU wheel) lets `perfq index` trace what each benchmark test executes, the
# selection's first source of truth; without it the index links benchmarks statically
# expecttest: torch.testing._internal imports it, and so do benchmarks that import that (fill_test)
install_once -e . expecttest
corpus=$(scripts/fetch-pytorch-source.sh | tail -n 1)
perfq index --repo "$corpus"
perfq stats --repo "$corpus"
work=$(mktemp -d)
trap 'git -C "$corpus" worktree remove --force "$work/case" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$corpus" worktree add -q --detach "$work/case" main
kernel=aten/src/ATen/native/cpu/SoftMaxKernel.cpp
# a one-line edit in a vectorized softmax helper (line 168 of the 2.6.0 file)
sed -i '168s/input_data + d0/input_data + d0 + 0/' "$work/case/$kernel"
git -C "$work/case" -c user.name=demo -c user.email=demo@localhost commit -qam "demo: touch a softmax kernel"
(cd "$work/case" && perfq affected main --explain)
