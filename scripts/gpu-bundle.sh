#!/usr/bin/env bash
# Prepare what scripts/gpu-check.sh needs on a GPU machine with no Go and
# no network, in .verdict/gpu-bundle (well under the 64 MiB a device run
# carries): the images' verdict binary and CPU libraries (make dist), and
# the pinned llama.cpp source as the git bundle that npm's node-llama-cpp
# ships (gpu-check.sh clones it and scripts/llama.cpp/source.sh checks its
# tree hash against the pin).
#
#   scripts/gpu-bundle.sh     # or: make gpu-bundle
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA:-.verdict}"
LLAMA_DIR="${LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/verdict/llama.cpp}"
out="$DATA/gpu-bundle"
rm -rf "$out" && mkdir -p "$out"
make --no-print-directory dist DIST="$out/dist" CPU_TARGET=x86-64-v3 >/dev/null
tar -czf "$out/dist.tar.gz" -C "$out" dist && rm -rf "$out/dist"
cache="$LLAMA_DIR/cache"
tgz="$(ls "$cache"/node-llama-cpp-*.tgz 2>/dev/null | head -1 || true)"
if [ -z "$tgz" ]; then
	npm="$(sed -n 's/^npm=//p' scripts/llama.cpp/pin)"
	mkdir -p "$cache" && (cd "$cache" && npm pack --silent --ignore-scripts "$npm" >/dev/null)
	tgz="$(ls "$cache"/node-llama-cpp-*.tgz | head -1)"
fi
tar -xzf "$tgz" -C "$out" package/llama/gitRelease.bundle
mv "$out/package/llama/gitRelease.bundle" "$out/llama.cpp.bundle" && rm -rf "$out/package"
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)): run scripts/gpu-check.sh on the GPU machine with carry [$out]"
