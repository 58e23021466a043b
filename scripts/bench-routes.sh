#!/usr/bin/env bash
# Compare the two llama.cpp routes side by side: `verdict bench` W0 (prefill)
# and W1 (shape-777 fan-out) on the llama `small` shape with both routes,
# and on the qwen35 `small` shape with the upstream route, interleaved in
# ROUNDS rounds so that a noisy machine hits every configuration alike.
# Prints the median and min–max of each figure.
#
#   scripts/bench-routes.sh                 # ROUNDS=3 QUESTIONS=6 THREADS=2
#   make bench-routes
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
QUESTIONS="${QUESTIONS:-6}"
THREADS="${THREADS:-2}"
DATA="${DATA:-.verdict}"
out="${OUT:-$DATA/bench-routes}"
mkdir -p "$out" "$DATA/models"

make --no-print-directory build LLAMA=module BIN=bin/module >/dev/null
make --no-print-directory build LLAMA=upstream BIN=bin/upstream >/dev/null
llama="$DATA/models/verdict-synth-small-seed1.gguf"
qwen="$DATA/models/verdict-synth-qwen35-small-seed1.gguf"
[ -f "$llama" ] || bin/module/verdict model synth --shape small --seed 1 -o "$llama" >/dev/null
[ -f "$qwen" ] || bin/upstream/verdict model synth --arch qwen35 --shape small --seed 1 -o "$qwen" >/dev/null

configs=("module llama $llama" "upstream llama $llama" "upstream qwen35 $qwen")
for r in $(seq 1 "$ROUNDS"); do
	for c in "${configs[@]}"; do
		set -- $c
		echo "round $r: $1 route, $2 small" >&2
		bin/$1/verdict bench --log-level warn --rounds 1 --workloads w0,w1 --states 1 --questions "$QUESTIONS" \
			--threads "$THREADS" --prefill-threads "$THREADS" --model "$3" --prefill-model "$3" \
			--out "$out/$1-$2-r$r.json" >/dev/null
	done
done
scripts/bench-summary.py "$out" "$ROUNDS" "route/model"
