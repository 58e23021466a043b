#!/usr/bin/env bash
# Installs Debian's chromium, the headless browser that the review page's
# browser test (internal/uphttp, TestReviewPageInBrowser) drives through
# chromedp. Without it that test skips and says so.
#
#   scripts/install-chromium.sh              # apt-get install chromium (as root)
#   LOG_DIR=.verdict/logs scripts/install-chromium.sh
#
# make test runs it (target test-deps).
#
# Idempotent: does nothing when a chromium is already on PATH (or
# VERDICT_CHROMIUM names one). As root on Debian/Ubuntu it installs the
# package with apt-get, its output in $LOG_DIR/apt-chromium.log (printed
# when it fails); elsewhere it says how to install it and leaves the test
# to skip.
set -euo pipefail

if [ -n "${VERDICT_CHROMIUM:-}" ] && [ -x "$VERDICT_CHROMIUM" ]; then
	echo "chromium: using VERDICT_CHROMIUM=$VERDICT_CHROMIUM"
	exit 0
fi
for name in chromium chromium-browser; do
	if bin="$(command -v "$name")"; then
		echo "chromium already installed: $bin"
		exit 0
	fi
done

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium is not installed and cannot be installed here (needs root and apt-get):" \
		"the review page's browser test will skip; install it with: apt-get install chromium" >&2
	exit 0
fi

LOG_DIR=${LOG_DIR:-.verdict/logs}
mkdir -p "$LOG_DIR"
log="$LOG_DIR/apt-chromium.log"
echo "chromium: installing Debian's chromium with apt-get (log: $log)"
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$log" 2>&1 ||
	{ tail -20 "$log" >&2; echo "chromium: apt-get failed; the whole log is $log" >&2; exit 1; }
echo "installed chromium: $(command -v chromium)"
