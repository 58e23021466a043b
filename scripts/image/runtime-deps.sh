#!/usr/bin/env bash
# The images' runtime stage: the shared libraries the verdict binary and
# its llama.cpp libraries load that a slim base lacks (libstdc++; libgomp
# for a build with OPENMP=on), CA certificates for AWS calls, and the
# folders verdict uses, owned by the unprivileged user the image runs as.
#
#   runtime-deps.sh              # in the Dockerfile (root, ROOT=/)
#   ROOT=DIR runtime-deps.sh     # `make image-steps`: the folders under DIR;
#                                # packages only checked, never installed
set -euo pipefail

ROOT="${ROOT:-/}"
UID_GID="${VERDICT_UID:-10001}"
pkgs=(ca-certificates libgomp1 libstdc++6)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$ROOT" != / ]; then
		echo "image runtime deps: missing on this machine: ${missing[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
	rm -rf /var/lib/apt/lists/*
fi
# /var/lib/verdict: `verdict up`'s data (mount a volume there);
# /opt/ml/model: where SageMaker puts the model.
for d in var/lib/verdict opt/ml/model; do
	mkdir -p "$ROOT/$d"
	if [ "$(id -u)" = 0 ]; then
		chown "$UID_GID:$UID_GID" "$ROOT/$d"
	fi
done
echo "image runtime deps: ${pkgs[*]} present; folders ready under $ROOT"
