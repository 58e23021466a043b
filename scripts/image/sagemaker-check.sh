#!/usr/bin/env bash
# Start an image's files (DIST: bin/verdict + lib/) the way SageMaker
# starts the container: the single argument `serve`, the model under an
# /opt/ml/model-shaped folder, the environment the deployment template
# gives the endpoint. Then check the container contract with the clients
# SageMaker users have: GET /ping with curl, POST /invocations through
# `aws sagemaker-runtime invoke-endpoint`, and a clean SIGTERM.
#
#   scripts/image/sagemaker-check.sh DIST
#
# It also checks that the binary is self-contained in DIST: its
# libraries resolve to DIST/lib and its ggml backends load from there.
# Binds 127.0.0.1 (SageMaker binds 0.0.0.0:8080; a test must not).
set -euo pipefail

DIST="$(cd "${1:?usage: sagemaker-check.sh DIST}" && pwd)"
BIN="$DIST/bin/verdict"
die() { echo "sagemaker-check: FAIL: $*" >&2; exit 1; }
[ -x "$BIN" ] || die "$BIN is missing (make dist DIST=$1)"
command -v curl >/dev/null || die "curl is required"

# Self-contained: every library the binary needs resolves, the llama.cpp
# ones from DIST/lib.
if ldd "$BIN" | grep -q "not found"; then ldd "$BIN" >&2; die "unresolved libraries"; fi
if [ -e "$DIST/lib/libllama.so" ]; then
	lib="$(ldd "$BIN" | awk '$1 ~ /^libllama\.so/ {print $3}')"
	[ "$(cd "$(dirname "$lib")" && pwd)" = "$DIST/lib" ] || die "libllama resolves to $lib, not $DIST/lib"
fi

work="$(mktemp -d)"
pid=""
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/opt/ml/model"
"$BIN" model synth --shape tiny --seed 1 -o "$work/opt/ml/model/model.gguf" >/dev/null
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

# The endpoint's environment in deploy/cloudformation.json: a SageMaker
# endpoint is reached only through IAM-signed InvokeEndpoint calls.
env -i PATH=/usr/bin:/bin HOME="$work" \
	VERDICT_NO_AUTH=true VERDICT_ADDR="127.0.0.1:$port" VERDICT_MODEL_DIR="$work/opt/ml/model" \
	"$BIN" serve >"$work/serve.log" 2>&1 &
pid=$!

url="http://127.0.0.1:$port"
for _ in $(seq 1 600); do
	code="$(curl -s -o /dev/null -w '%{http_code}' "$url/ping" || true)"
	[ "$code" = 200 ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; die "verdict serve exited before /ping answered"; }
	sleep 0.2
done
[ "$code" = 200 ] || { cat "$work/serve.log" >&2; die "/ping never answered 200 (last $code)"; }
grep -q '"devices"\|devices=' "$work/serve.log" || { cat "$work/serve.log" >&2; die "the start-up log names no devices"; }

cp "$(dirname "$0")/../../examples/requests/semif-finance-ops.json" "$work/in.json"
AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1 \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_MAX_ATTEMPTS=1 AWS_PAGER= \
	aws sagemaker-runtime invoke-endpoint --endpoint-url "$url" --endpoint-name verdict \
	--content-type application/json --body "fileb://$work/in.json" "$work/out.json" >"$work/cli.log" 2>&1 ||
	{ cat "$work/cli.log" "$work/serve.log" >&2; die "invoke-endpoint failed"; }
python3 - "$work/out.json" <<'PY' || die "the /invocations answer is not a scored decision: $(cat "$work/out.json")"
import json, sys
r = json.load(open(sys.argv[1]))["result"]
p = r["probabilities"]
assert len(p) == len(r["option_ids"]) >= 2 and abs(sum(p) - 1) < 1e-6, p
assert r["chosen"] in r["option_ids"], r
m = r["model"]
assert "pinned " in m["llama_cpp"] and m["backend"], m
print("sagemaker-check: /invocations scored %d options (chosen %s) on %s, %s" % (len(p), r["chosen"], m["backend"], m["llama_cpp"]))
PY

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" = 0 ] || { cat "$work/serve.log" >&2; die "verdict serve exited $status on SIGTERM"; }
echo "sagemaker-check: ok ($BIN serve: /ping 200, invoke-endpoint answered, SIGTERM exit 0)"
