#!/usr/bin/env bash
# Build the pinned llama.cpp (libllama + ggml, CPU backend; CUDA
# with GPU=cuda) with CMake and install it into a prefix that cgo links
# against. Prints the prefix.
#
#   scripts/llama.cpp/build.sh            # native CPU, into $LLAMA_DIR/<tree>-native-noomp
#   CPU_TARGET=x86-64-v3 scripts/llama.cpp/build.sh
#   LINK=dynamic CPU_TARGET=x86-64-v3 scripts/llama.cpp/build.sh   # the images' libraries
#   LINK=dynamic GPU=cuda CUDA_ARCHS="75;86;89;90" scripts/llama.cpp/build.sh
#   TOOLS=server scripts/llama.cpp/build.sh   # llama-server, the peer of `make bench-peer`
#   OPENMP=on scripts/llama.cpp/build.sh      # ggml's threads from OpenMP (llama.cpp's default)
#
# OPENMP=off (the default for verdict's libraries) runs ggml's graph on its
# own thread pool; OPENMP=on on libgomp, as llama.cpp's CMake does by
# default. On the 2-core machines of this project ggml's own pool is
# faster (docs/performance.md); the prefix of a build without OpenMP ends
# in "-noomp". TOOLS=server defaults to OPENMP=on: the peer is
# llama-server as llama.cpp's CMake builds it unless told otherwise.
#
# LINK=static (the default) gives static archives: one self-contained
# binary. LINK=dynamic gives shared libraries with ggml's backends as
# loadable modules (GGML_BACKEND_DL): libggml-cpu.so, and libggml-cuda.so
# with GPU=cuda. The binary is the same for both; at start it loads the
# backends it finds beside it (lib/ next to bin/), so a CPU image and a GPU
# image differ only by the modules they ship. GPU=cuda needs LINK=dynamic
# only in that the CUDA module can then be added to a binary built where
# there is no CUDA (scripts/gpu-check.sh); static CUDA builds work too.
#
# CPU_TARGET maps onto ggml's CPU options: native → GGML_NATIVE; x86-64-v2,
# -v3, -v4 → the matching GGML_SSE42/AVX/AVX2/FMA/F16C/BMI2/AVX512 set;
# anything else is passed to the compiler as -march. No curl, OpenSSL,
# tests, tools, examples or server are built. The prefix name carries the
# tree hash and the configuration, so a changed configuration is a new
# prefix (cgo's build cache cannot see a rebuilt library at the same path).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
TREE="$(sed -n 's/^tree=//p' "$here/pin")"
LLAMA_DIR="${LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/verdict/llama.cpp}"
CPU_TARGET="${CPU_TARGET:-native}"
GPU="${GPU:-}"
LINK="${LINK:-static}"
TOOLS="${TOOLS:-}"
if [ "$TOOLS" = server ]; then OPENMP="${OPENMP:-on}"; else OPENMP="${OPENMP:-off}"; fi
CUDA_ARCHS="${CUDA_ARCHS:-75;86;89;90}"
JOBS="${JOBS:-$(nproc)}"

# CMake (and Ninja when it can be had) are the only extra tools: install
# them from Debian's packages when this is a root shell on a Debian machine.
if ! command -v cmake >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		mkdir -p "$LLAMA_DIR"
		echo "llama.cpp build: installing cmake and ninja-build with apt-get (log: $LLAMA_DIR/apt.log)" >&2
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake ninja-build; } >"$LLAMA_DIR/apt.log" 2>&1 ||
			{ tail -20 "$LLAMA_DIR/apt.log" >&2; echo "llama.cpp build: apt-get failed; the whole log is $LLAMA_DIR/apt.log" >&2; exit 1; }
	else
		echo "llama.cpp build: cmake is required (e.g. apt-get install cmake ninja-build)" >&2
		exit 1
	fi
fi

src="$("$here/source.sh" "${LLAMA_SRC_DIR:-$LLAMA_DIR/src}")"
src="$(cd "$src" && pwd)"

case "$LINK" in
static) shared=OFF ;;
dynamic) shared=ON ;;
*) echo "llama.cpp build: LINK=$LINK is not known (static or dynamic)" >&2; exit 2 ;;
esac
flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=$shared -DCMAKE_POSITION_INDEPENDENT_CODE=ON
	-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF
	-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF
	-DGGML_CCACHE=OFF)
case "$OPENMP" in
on) flags+=(-DGGML_OPENMP=ON) ;;
off) flags+=(-DGGML_OPENMP=OFF) ;;
*) echo "llama.cpp build: OPENMP=$OPENMP is not known (on or off)" >&2; exit 2 ;;
esac
case "$CPU_TARGET" in
native) flags+=(-DGGML_NATIVE=ON) ;;
x86-64-v2) flags+=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF) ;;
x86-64-v3) flags+=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON) ;;
x86-64-v4) flags+=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON) ;;
*) flags+=(-DGGML_NATIVE=OFF "-DCMAKE_C_FLAGS=-march=$CPU_TARGET" "-DCMAKE_CXX_FLAGS=-march=$CPU_TARGET") ;;
esac
name="${TREE:0:12}-$CPU_TARGET"
[ "$OPENMP" = off ] && name="$name-noomp"
if [ "$LINK" = dynamic ]; then
	# $ORIGIN: each library finds the others in its own directory.
	flags+=(-DGGML_BACKEND_DL=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON)
	name="$name-dl"
fi
case "$TOOLS" in
"") ;;
server)
	# llama-server of the same pin and CPU flags: the peer benchmark's
	# standard path (no curl, no TLS: it serves 127.0.0.1 only there).
	flags+=(-DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON)
	name="$name-server"
	;;
*) echo "llama.cpp build: TOOLS=$TOOLS is not known (server, or empty)" >&2; exit 2 ;;
esac
case "$GPU" in
"") ;;
cuda)
	flags+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS")
	name="$name-cuda-${CUDA_ARCHS//;/_}"
	;;
*) echo "llama.cpp build: GPU=$GPU is not known (cuda, or empty for CPU only)" >&2; exit 2 ;;
esac

prefix="${LLAMA_PREFIX:-$LLAMA_DIR/$name}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
build="$prefix.build"
log="$build.log"
record="$prefix/.verdict-built"

# The build record is the configuration on its first line, then the
# sha256 of every installed file. A prefix is used only when both match:
# a half-built prefix (no record) or a changed or missing file is rebuilt
# here, at once, rather than failing at link time.
if [ -f "$record" ] && [ "$(head -1 "$record")" = "${flags[*]}" ]; then
	if bad="$(cd "$prefix" && tail -n +2 "$record" | sha256sum -c --quiet 2>/dev/null)"; then
		echo "$prefix"
		exit 0
	fi
	echo "llama.cpp build: $prefix does not match its build record ($(echo "$bad" | head -1 | tr -s ' ')); rebuilding it (to clear the whole cache: rm -rf '$LLAMA_DIR')" >&2
elif [ -n "$(ls -A "$prefix" 2>/dev/null)" ]; then
	echo "llama.cpp build: $prefix is half-built (no build record for this configuration); rebuilding it" >&2
fi
rm -rf "$prefix"
mkdir -p "$prefix"

fail() {
	echo "llama.cpp build: $1 failed; the last lines of its log follow, the whole log is $log" >&2
	tail -20 "$log" >&2
	exit 1
}
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
what="libllama"
[ "$TOOLS" = server ] && what="llama-server"
echo "llama.cpp build: building $what of $(sed -n 's/^tag=//p' "$here/pin") ($name) with CMake (~3 min on 2 cores); log: $log" >&2
echo "cmake ${flags[*]}" >"$log"
start=$(date +%s)
cmake -S "$src" -B "$build" "${gen[@]}" "${flags[@]}" "-DCMAKE_INSTALL_PREFIX=$prefix" >>"$log" 2>&1 || fail "cmake configure"
# record_build writes the build record (see above) of what is in $prefix.
record_build() {
	local sums
	sums="$(cd "$prefix" && find . -type f ! -name .verdict-built | LC_ALL=C sort | xargs -r sha256sum)"
	printf '%s\n%s\n' "${flags[*]}" "$sums" >"$record"
}
if [ "$TOOLS" = server ]; then
	targets=(llama-server)
	# LINK=dynamic: llama-server and the libraries it loads, backend
	# modules included, side by side in bin/ (their RPATH is $ORIGIN), so
	# that one build gives the GPU check both llama-server and verdict's
	# libraries.
	if [ "$LINK" = dynamic ]; then
		targets+=(ggml-cpu)
		[ "$GPU" = cuda ] && targets+=(ggml-cuda)
	fi
	cmake --build "$build" -j "$JOBS" --target "${targets[@]}" >>"$log" 2>&1 || fail "cmake --build"
	mkdir -p "$prefix/bin"
	cp -f "$build/bin/llama-server" "$prefix/bin/llama-server"
	if [ "$LINK" = dynamic ]; then
		cp -a "$build"/bin/*.so* "$prefix/bin/"
	fi
	record_build
	echo "llama.cpp build: llama-server done in $(($(date +%s) - start)) s into $prefix/bin" >&2
	echo "$prefix"
	exit 0
fi
targets=(llama)
# Backend modules are not dependencies of libllama when they are loaded
# at run time: name them.
if [ "$LINK" = dynamic ]; then
	targets+=(ggml-cpu)
	[ "$GPU" = cuda ] && targets+=(ggml-cuda)
fi
cmake --build "$build" -j "$JOBS" --target "${targets[@]}" >>"$log" 2>&1 || fail "cmake --build"
cmake --install "$build" >>"$log" 2>&1 || fail "cmake --install"
# ggml installs backend modules into bin/; verdict loads them from beside
# libggml, so they go to lib/ with the libraries.
if [ "$LINK" = dynamic ]; then
	for m in "$prefix"/bin/libggml-*.so; do
		[ -e "$m" ] && mv -f "$m" "$prefix/lib/"
	done
fi
# What cgo links, as one linker script (ld reads a file it cannot parse
# as an object as a script, as glibc's own libc.so is): the binding asks
# for -lverdict-llama and this configuration answers with its libraries
# in link order. Backend modules (dynamic) are loaded at run time, never
# linked.
libs=()
for l in llama ggml ggml-cpu ggml-cuda ggml-base; do
	if [ "$LINK" = static ] && [ -f "$prefix/lib/lib$l.a" ]; then
		libs+=("$prefix/lib/lib$l.a")
	elif [ "$LINK" = dynamic ] && [ -f "$prefix/lib/lib$l.so" ] && [[ $l != ggml-cpu && $l != ggml-cuda ]]; then
		libs+=("-l$l")
	fi
done
extra=(-lstdc++ -lm -lpthread)
[ "$OPENMP" = on ] && extra+=(-lgomp)
if [ "$GPU" = cuda ] && [ "$LINK" = static ]; then
	extra+=(-lcudart -lcublas -lcublasLt -lcuda)
fi
cat >"$prefix/lib/libverdict-llama.so" <<LD
/* llama.cpp $(sed -n 's/^tag=//p' "$here/pin") ($name) for verdict's cgo binding;
   written by scripts/llama.cpp/build.sh. */
GROUP ( ${libs[*]} )
INPUT ( ${extra[*]} )
LD
# The pin, for the binary to report (the binding includes it).
cat >"$prefix/include/verdict-pin.h" <<H
#define VERDICT_LLAMA_PIN_TAG "$(sed -n 's/^tag=//p' "$here/pin")"
#define VERDICT_LLAMA_PIN_TREE "$TREE"
#define VERDICT_LLAMA_CONFIG "$name"
H
# The source tree (its models/ggml-vocab-*.gguf are the real tokenizers
# the tests use), reachable from the prefix.
ln -sfn "$src" "$prefix/src"
record_build
echo "llama.cpp build: done in $(($(date +%s) - start)) s into $prefix" >&2
echo "$prefix"
