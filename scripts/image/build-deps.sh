#!/usr/bin/env bash
# The tools the images' build stage needs beyond Go and a C/C++ compiler:
# CMake, Ninja, git (the source's last-resort fetch) and CA certificates.
# Installs what is missing with apt-get (root on Debian/Ubuntu); elsewhere
# names what is missing. Runs in both Dockerfiles' build stages and in
# `make image-steps`.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v git >/dev/null 2>&1 || need+=(git)
command -v make >/dev/null 2>&1 || need+=(make)
command -v g++ >/dev/null 2>&1 || need+=(g++)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [ ${#need[@]} -eq 0 ]; then
	echo "image build deps: all present (cmake $(cmake --version | sed -n '1s/.* //p'), $(g++ --version | head -1))"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "image build deps: missing ${need[*]} (install them, e.g. apt-get install ${need[*]})" >&2
	exit 1
fi
echo "image build deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
rm -rf /var/lib/apt/lists/*
