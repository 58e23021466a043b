#!/usr/bin/env bash
# Run, outside Docker, every step of Dockerfile (cpu) or Dockerfile.gpu
# (gpu) that can run without a Docker engine, in the same order with the
# same make targets and scripts (deploy/dockerfile_test.go checks that the
# Dockerfiles call nothing else), then start the result as SageMaker would.
#
#   scripts/image/steps.sh cpu|gpu
#
# Environment: DIST (default .verdict/image-<cpu|gpu>/dist), STAGE (the
# runtime stage's folders, default beside DIST), LLAMA_DIR as for make.
# The gpu image's CUDA compile needs nvcc; without it that step and the
# ones after it are reported as not run here.
set -euo pipefail
cd "$(dirname "$0")/../.."

image="${1:?usage: steps.sh cpu|gpu}"
case "$image" in
cpu) dockerfile=Dockerfile gpu_args=() ;;
gpu) dockerfile=Dockerfile.gpu gpu_args=(GPU=cuda) ;;
*) echo "image-steps: IMAGE=$image: want cpu or gpu" >&2; exit 2 ;;
esac
out="${DIST:-.verdict/image-$image/dist}"
stage="${STAGE:-$(dirname "$out")/root}"
step() { echo "== image-steps ($dockerfile): $*"; }
t0=$(date +%s)

# Build stage.
if [ "$image" = cpu ]; then
	step "RUN make image-deps"
	make --no-print-directory image-deps
else
	step "RUN scripts/image/build-deps.sh" # the CUDA image may lack make
	scripts/image/build-deps.sh
fi
step "RUN make llama-src"
make --no-print-directory llama-src
if [ "$image" = gpu ] && ! command -v nvcc >/dev/null 2>&1 && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
	step "RUN make dist GPU=cuda — not run here: no nvcc (the CUDA toolkit); scripts/gpu-check.sh builds it on a GPU machine"
	echo "image-steps: gpu: the steps that need no CUDA ran; the CUDA compile and the runtime stage did not" >&2
	exit 0
fi
step "RUN make dist CPU_TARGET=x86-64-v3 ${gpu_args[*]}"
make --no-print-directory dist DIST="$out" CPU_TARGET=x86-64-v3 "${gpu_args[@]}"

# Runtime stage: the packages (checked here, installed in the image) and
# folders, then the files copied from the build stage.
step "RUN runtime-deps.sh"
ROOT="$stage" scripts/image/runtime-deps.sh
step "RUN verdict version"
"$out/bin/verdict" version
step "started as SageMaker starts the image (verdict serve)"
scripts/image/sagemaker-check.sh "$out"
echo "image-steps: $dockerfile: every step ran in $(($(date +%s) - t0)) s; files in $out"
