#!/usr/bin/env bash
# Installs the AWS Lambda Runtime Interface Emulator (aws-lambda-rie), which
# the lambda package's tests use to run the real bootstrap binary.
#
#   scripts/install-lambda-rie.sh            # into $(go env GOPATH)/bin
#   RIE_BIN_DIR=/opt/bin scripts/install-lambda-rie.sh
#
# make test runs it (target test-deps).
#
# Idempotent: does nothing when the pinned version is already installed.
# The emulator has no tagged releases on the module proxy; this pseudo-version
# is the upstream commit of 2026-10-30 (check with
# `go list -m -versions github.com/aws/aws-lambda-runtime-interface-emulator`
# or https://proxy.golang.org/github.com/aws/aws-lambda-runtime-interface-emulator/@latest).
set -euo pipefail

RIE_MODULE=github.com/aws/aws-lambda-runtime-interface-emulator
RIE_VERSION=${RIE_VERSION:-v0.0.0-20261030222936-bef5c4ba774d}
RIE_BIN_DIR=${RIE_BIN_DIR:-$(go env GOPATH)/bin}
bin="$RIE_BIN_DIR/aws-lambda-rie"
stamp="$RIE_BIN_DIR/.aws-lambda-rie.version"

if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$RIE_VERSION" ]; then
	echo "aws-lambda-rie $RIE_VERSION already installed: $bin"
	exit 0
fi

mkdir -p "$RIE_BIN_DIR"
# Outside any module, so the repository's go.mod is not touched; the
# download lines go to a log that a failure prints.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
(cd / && GOBIN="$RIE_BIN_DIR" GOFLAGS=-mod=mod go install "$RIE_MODULE/cmd/aws-lambda-rie@$RIE_VERSION") >"$log" 2>&1 ||
	{ cat "$log" >&2; echo "aws-lambda-rie: go install failed" >&2; exit 1; }
echo "$RIE_VERSION" >"$stamp"
echo "installed aws-lambda-rie $RIE_VERSION: $bin"
