#!/usr/bin/env bash
# The main job: score examples/decisions.jsonl offline with `verdict score`,
# then start `verdict up` (front door + local queue + worker +
# results store in one process), submit the example requests in
# examples/requests/, wait for their results, print the outcomes, and stop
# the server cleanly.
#
#   scripts/run-examples.sh [MODEL.gguf]      # or VERDICT_MODEL=MODEL.gguf
#
# Without a model, `verdict up` synthesizes the tiny synthetic model into
# its data directory. Environment:
#   VERDICT_BIN      the verdict binary (default: bin/verdict; `make build`)
#   VERDICT_MODEL    GGUF model (default: synthesized)
#   EXAMPLES_DIR     request files (default: examples/requests)
#   RUN_TIMEOUT      seconds to wait for all results (default: 300)
#   KEEP_DATA=1      keep the temporary data directory
# Exit status: 0 when every request completed without an error result.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${VERDICT_BIN:-bin/verdict}
MODEL=${1:-${VERDICT_MODEL:-}}
EXAMPLES_DIR=${EXAMPLES_DIR:-examples/requests}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}

die() { echo "run-examples: $*" >&2; exit 1; }
[ -x "$BIN" ] || die "$BIN not found; run \`make build\` first"
command -v curl >/dev/null || die "curl is required"
HAVE_JQ=0; command -v jq >/dev/null && HAVE_JQ=1
shopt -s nullglob
files=("$EXAMPLES_DIR"/*.json)
[ ${#files[@]} -gt 0 ] || die "no request files in $EXAMPLES_DIR"

DATA=$(mktemp -d "${TMPDIR:-/tmp}/verdict-examples.XXXXXX")
LOG="$DATA/up.log"
PID=""
cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
		kill -TERM "$PID" 2>/dev/null || true
		wait "$PID" 2>/dev/null || true
	fi
	if [ "${KEEP_DATA:-0}" = 1 ]; then echo "data kept in $DATA"; else rm -rf "$DATA"; fi
}
trap cleanup EXIT

if [ -n "$MODEL" ]; then
	[ -f "$MODEL" ] || die "model $MODEL not found"
	echo "model: $MODEL"
else
	MODEL="$DATA/verdict-synth-tiny-seed1.gguf"
	echo "model: none given; synthesizing the tiny synthetic model (its scores are not meaningful)"
	"$BIN" model synth --shape tiny --seed 1 -o "$MODEL"
fi
echo

# Part 1: offline scoring of examples/decisions.jsonl (SemIf, one per line).
SCORE_IN=${SCORE_IN:-examples/decisions.jsonl}
if [ -f "$SCORE_IN" ]; then
	echo "== verdict score $SCORE_IN"
	env -u VERDICT_MODEL "$BIN" score --model "$MODEL" --log-level warn "$SCORE_IN" >"$DATA/scores.jsonl" ||
		die "verdict score failed (see $DATA/scores.jsonl)"
	if [ $HAVE_JQ = 1 ]; then
		jq -r '"  line \(.line) \(.id | .[0:36] | . + " " * (36 - length)) → \(.chosen)   p=\(.probabilities | max * 1000 | round / 1000)  (\(.tokens.input) tokens, \(.timing_ms.total) ms)"' "$DATA/scores.jsonl"
	else
		sed 's/"prompt_sha256".*//' "$DATA/scores.jsonl"
	fi
	echo
fi

# Part 2: the whole pipeline in one process.
args=(up --addr 127.0.0.1:0 --data "$DATA" --log-format json --model "$MODEL")
# Unset VERDICT_MODEL so that only the argument decides.
env -u VERDICT_MODEL "$BIN" "${args[@]}" 2>"$LOG" &
PID=$!

# --addr 127.0.0.1:0 picks a free port; the listening line names it.
ADDR=""
for _ in $(seq 1 600); do
	ADDR=$(sed -n 's/.*"msg":"verdict up: listening".*"addr":"\([^"]*\)".*/\1/p' "$LOG" | head -n1)
	[ -n "$ADDR" ] && break
	kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; die "verdict up exited before listening"; }
	sleep 0.1
done
[ -n "$ADDR" ] || { cat "$LOG" >&2; die "verdict up did not start listening"; }
URL="http://$ADDR"
echo "verdict up: $URL (data $DATA)"
echo

ids=(); names=()
for f in "${files[@]}"; do
	name=$(basename "$f")
	case "$name" in
		systemone-*) path=/v1/systemone/async ;;
		*) path=/v1/decisions ;;
	esac
	out=$(curl -sS -X POST "$URL$path" -H 'Content-Type: application/json' \
		-H "Idempotency-Key: example-$name" --data-binary @"$f" -w '\n%{http_code}')
	code=${out##*$'\n'}; body=${out%$'\n'*}
	[ "$code" = 202 ] || die "$name: POST $path answered $code: $body"
	if [ $HAVE_JQ = 1 ]; then
		rid=$(jq -r .request_id <<<"$body")
		echo "submitted $name → POST $path: $rid ($(jq -r '.decision_ids | length' <<<"$body") decisions, route $(jq -r .route <<<"$body"))"
	else
		rid=$(sed -n 's/.*"request_id":"\([^"]*\)".*/\1/p' <<<"$body" | head -n1)
		echo "submitted $name → POST $path: $rid"
	fi
	ids+=("$rid"); names+=("$name")
done
echo

deadline=$((SECONDS + RUN_TIMEOUT))
failed=0
for i in "${!ids[@]}"; do
	rid=${ids[$i]}
	while :; do
		st=$(curl -sS "$URL/v1/requests/$rid")
		grep -q '"status":"done"' <<<"$(sed 's/"decisions".*//' <<<"$st")" && break
		[ $SECONDS -lt $deadline ] || die "timed out after ${RUN_TIMEOUT}s waiting for $rid"
		sleep 0.2
	done
	echo "== ${names[$i]}  ($rid)"
	if [ $HAVE_JQ = 1 ]; then
		jq -r '.decisions[] | .record as $r | $r.result as $res |
			"  \(.id | .[0:28] | . + " " * (28 - length)) \($r.status | . + " " * (10 - length)) " +
			(if $res.error then "error: \($res.error.code): \($res.error.message)"
			 else "→ \($res.outcome.chosen // $res.chosen // "-")" +
				"   [" + ([$res.option_ids, $res.probabilities] | transpose | map("\(.[0])=\(.[1] * 1000 | round / 1000)") | join(" ")) + "]"
			 end)' <<<"$st"
		if jq -e '[.decisions[].record.result.error] | any' <<<"$st" >/dev/null; then failed=1; fi
	else
		echo "$st"
		grep -q '"error":{' <<<"$st" && failed=1
	fi
	echo
done

kill -TERM "$PID"
if ! wait "$PID"; then
	cat "$LOG" >&2
	die "verdict up did not stop cleanly"
fi
PID=""
echo "verdict up stopped cleanly"
[ $failed = 0 ] || die "some decisions ended in an error result"
