#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, nvcc and CMake but no Go
# and no network. It receives what `make gpu-bundle` prepared here
# (.verdict/gpu-bundle: the verdict binary of the images (dist.tar.gz), built with
# loadable ggml backends, and the pinned llama.cpp source as a git bundle),
# builds the pinned llama.cpp with the CUDA backend there for the GPU it
# finds, puts those libraries beside the binary, and then:
#   1. prints `verdict version` (llama.cpp, devices: the GPU must be one);
#   2. scores the same decisions with every layer on the GPU and on the CPU
#      (--gpu-layers -1 and 0): the chosen option must be the same for each
#      decision; prints the largest |Δp|;
#   3. runs `verdict bench` (W0 prefill, W1 shape-777 fan-out) on the GPU and
#      on the CPU and prints both tables; every result names its backend;
#   4. runs the peer comparison with both on the GPU (`verdict bench --peer
#      llama-server --gpu-layers -1`): verdict serve against llama-server of
#      the same build, on shape-777 and on JevBench cases (issue #14's GPU
#      goal: 3x llama-server's best on shape-777). GPU_CHECK_PEER=0 skips it.
#
# One CMake build gives both llama-server and verdict's libraries
# (TOOLS=server LINK=dynamic: llama-server with the shared libraries and
# backend modules beside it), so the CUDA backend is compiled once.
#
#   scripts/gpu-check.sh                 # on the GPU machine, from the repository root
#   GPU_CHECK_CPU_ONLY=1 GPU_CHECK_SHAPE=tiny GPU_CHECK_CASES=2 scripts/gpu-check.sh
#                                        # here: the same steps without CUDA (a dry run of the script)
#
# Sized for about 10 minutes on a 16-core machine (the CUDA build for one
# architecture is most of it; the CPU-only dry run here, tiny model, took
# 412 s on 2 cores, 385 of them the build). Exit status 0 only when every
# check passes.
set -euo pipefail
cd "$(dirname "$0")/.."

BUNDLE="${GPU_BUNDLE:-.verdict/gpu-bundle}"
WORK="${GPU_CHECK_DIR:-$(mktemp -d)}"
CPU_ONLY="${GPU_CHECK_CPU_ONLY:-}"
JOBS="${JOBS:-$(nproc)}"
t0=$(date +%s)
say() { echo "== gpu-check [$(($(date +%s) - t0)) s]: $*"; }
die() { echo "gpu-check: FAIL: $*" >&2; exit 1; }

[ -f "$BUNDLE/dist.tar.gz" ] || die "$BUNDLE/dist.tar.gz is missing: run make gpu-bundle where Go is"
[ -f "$BUNDLE/llama.cpp.bundle" ] || die "$BUNDLE/llama.cpp.bundle is missing: run make gpu-bundle"
command -v cmake >/dev/null || die "cmake is required"
command -v git >/dev/null || die "git is required (to unpack the source bundle)"
command -v python3 >/dev/null || die "python3 is required (to compare results)"
if [ -z "$CPU_ONLY" ]; then
	command -v nvidia-smi >/dev/null || die "nvidia-smi is missing: no NVIDIA driver here"
	export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
	command -v nvcc >/dev/null || die "nvcc is required (the CUDA toolkit)"
	nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader
	arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
	say "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), GPU architecture $arch"
fi

say "unpacking the pinned llama.cpp source (checked against the pin's tree hash)"
rm -rf "$WORK/src-clone"
git -c advice.detachedHead=false clone -q "$BUNDLE/llama.cpp.bundle" "$WORK/src-clone"
what="GPU=cuda CUDA_ARCHS=${arch:-}"
[ -n "$CPU_ONLY" ] && what="CPU only"
say "building llama.cpp (LINK=dynamic, $what) with $JOBS jobs"
gpu_env=()
[ -z "$CPU_ONLY" ] && gpu_env=(GPU=cuda "CUDA_ARCHS=$arch")
prefix="$(env LLAMA_SRC="$WORK/src-clone" LLAMA_DIR="${GPU_CHECK_LLAMA_DIR:-$WORK/llama.cpp}" LINK=dynamic CPU_TARGET=x86-64-v3 JOBS="$JOBS" \
	TOOLS=server OPENMP=off "${gpu_env[@]}" scripts/llama.cpp/build.sh)" || die "the llama.cpp build failed"
server="$prefix/bin/llama-server"
[ -x "$server" ] || die "the build has no $server"
dist="$WORK/dist"
rm -rf "$dist" && tar -xzf "$BUNDLE/dist.tar.gz" -C "$WORK"
# This machine's build of the same pinned source replaces the libraries
# built where the binary was: the same ABI, plus the CUDA module.
rm -f "$dist"/lib/*.so* && cp -a "$prefix"/bin/*.so* "$dist/lib/"
V="$dist/bin/verdict"
say "built; libraries: $(cd "$dist/lib" && ls ./*.so | tr '\n' ' ')"

say "verdict version"
"$V" version | tee "$WORK/version.txt"
if [ -z "$CPU_ONLY" ]; then
	grep -q "(gpu)" "$WORK/version.txt" || die "verdict found no GPU device: the CUDA backend did not load"
fi

shape="${GPU_CHECK_SHAPE:-small}"
model="$WORK/$shape.gguf"
"$V" model synth --shape "$shape" --seed 1 -o "$model" >/dev/null
decisions="$WORK/decisions.jsonl"
cat examples/decisions.jsonl >"$decisions"
head -n "${GPU_CHECK_CASES:-24}" "${JEVBENCH:-.verdict/data/jevbench-240}/cases.jsonl" >>"$decisions" 2>/dev/null || true

say "scoring $(wc -l <"$decisions") lines on the GPU (--gpu-layers -1) and on the CPU (--gpu-layers 0)"
"$V" batch --log-level warn --model "$model" --gpu-layers -1 "$decisions" -o "$WORK/gpu.jsonl"
"$V" batch --log-level warn --model "$model" --gpu-layers 0 "$decisions" -o "$WORK/cpu.jsonl"
python3 - "$WORK/gpu.jsonl" "$WORK/cpu.jsonl" "$CPU_ONLY" <<'PY'
import json, sys
def results(path):
    out = []
    for line in open(path):
        rec = json.loads(line)
        rs = rec.get("results") or ([rec["result"]] if "result" in rec else [])
        for r in rs:
            out.append(r)
    return out
gpu, cpu = results(sys.argv[1]), results(sys.argv[2])
cpu_only = sys.argv[3] != ""
assert len(gpu) == len(cpu) > 0, (len(gpu), len(cpu))
backends = {r.get("model", {}).get("backend") for r in gpu}
if not cpu_only:
    assert "CPU" not in backends, "GPU results name backend %s" % backends
worst, differ = 0.0, 0
for g, c in zip(gpu, cpu):
    if g.get("error") or c.get("error"):
        raise SystemExit("an error result: %s / %s" % (g.get("error"), c.get("error")))
    if g["chosen"] != c["chosen"]:
        differ += 1
    worst = max(worst, max(abs(a - b) for a, b in zip(g["probabilities"], c["probabilities"])))
print("gpu-check: %d decisions; argmax equal in %d; max |Δp| = %.2e; GPU backend %s" % (len(gpu), len(gpu) - differ, worst, ",".join(sorted(map(str, backends)))))
if differ:
    raise SystemExit("gpu-check: FAIL: %d decisions chose differently on GPU and CPU" % differ)
PY

for layers in -1 0; do
	say "verdict bench --gpu-layers $layers"
	"$V" bench --log-level warn --workloads w0,w1 --states 1 --questions "${GPU_CHECK_QUESTIONS:-6}" --prefill-threads "${GPU_CHECK_THREADS:-$JOBS}" --gpu-layers "$layers" \
		--model "$model" --prefill-model "$model" --out "$WORK/bench$layers.json"
done
if [ "${GPU_CHECK_PEER:-1}" != 0 ]; then
	peer_layers=-1
	[ -n "$CPU_ONLY" ] && peer_layers=0
	say "verdict serve vs llama-server, both with --gpu-layers $peer_layers: shape-777"
	"$V" bench --log-level warn --peer llama-server --llama-server "$server" --model "$model" --gpu-layers "$peer_layers" \
		--peer-workload shape777 --states "${GPU_CHECK_PEER_STATES:-4}" --questions 21 --peer-slots 4 \
		--rounds "${GPU_CHECK_PEER_ROUNDS:-2}" --threads "${GPU_CHECK_THREADS:-$JOBS}" --out "$WORK/peer-shape777.json"
	jev="${JEVBENCH:-.verdict/data/jevbench-240}/cases.jsonl"
	if [ -f "$jev" ]; then
		say "verdict serve vs llama-server, both with --gpu-layers $peer_layers: JevBench-240"
		"$V" bench --log-level warn --peer llama-server --llama-server "$server" --model "$model" --gpu-layers "$peer_layers" \
			--jevbench "$jev" --peer-cases "${GPU_CHECK_CASES:-24}" --peer-slots 4 \
			--rounds "${GPU_CHECK_PEER_ROUNDS:-2}" --threads "${GPU_CHECK_THREADS:-$JOBS}" --out "$WORK/peer-jevbench.json"
	fi
fi
say "ok: every check passed (work files in $WORK)"
