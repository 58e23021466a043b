#!/usr/bin/env bash
# The images' portable CPU build against a native one, side by side:
# `verdict bench` W0 (prefill) on the llama `small` shape with
#   native   — make build (static, -march=native)
#   portable — make dist (the images' files: LINK=dynamic, x86-64-v3)
# interleaved in ROUNDS rounds; median and min–max of each figure.
#
#   scripts/bench-portable.sh        # ROUNDS=3 THREADS=2
#   make bench-portable
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-2}"
DATA="${DATA:-.verdict}"
out="${OUT:-$DATA/bench-portable}"
rm -rf "$out" && mkdir -p "$out" "$DATA/models"

make --no-print-directory build BIN=bin/native >/dev/null
make --no-print-directory dist DIST="$DATA/dist-portable" CPU_TARGET=x86-64-v3 >/dev/null
llama="$DATA/models/verdict-synth-small-seed1.gguf"
[ -f "$llama" ] || bin/native/verdict model synth --shape small --seed 1 -o "$llama" >/dev/null

configs=("native bin/native/verdict" "portable-x86-64-v3 $DATA/dist-portable/bin/verdict")
for r in $(seq 1 "$ROUNDS"); do
	for c in "${configs[@]}"; do
		set -- $c
		echo "round $r: $1" >&2
		"$2" bench --log-level warn --rounds 1 --workloads w0 --states 1 --questions 1 \
			--threads "$THREADS" --prefill-threads "$THREADS" --model "$llama" --prefill-model "$llama" \
			--out "$out/$1-r$r.json" >/dev/null
	done
done
scripts/bench-summary.py "$out" "$ROUNDS" "build"
