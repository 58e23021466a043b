#!/usr/bin/env bash
# Build the pinned upstream llama.cpp (libllama + ggml, CPU backend; CUDA
# with GPU=cuda) with CMake and install it into a prefix that cgo links
# against. Prints the prefix.
#
#   scripts/llama.cpp/build.sh            # native CPU, into $LLAMA_DIR/<tree>-native
#   CPU_TARGET=x86-64-v3 scripts/llama.cpp/build.sh
#   LINK=dynamic CPU_TARGET=x86-64-v3 scripts/llama.cpp/build.sh   # the images' libraries
#   LINK=dynamic GPU=cuda CUDA_ARCHS="75;86;89;90" scripts/llama.cpp/build.sh
#   TOOLS=server scripts/llama.cpp/build.sh   # llama-server, the peer of `make bench-peer`
#   OPENMP=on scripts/llama.cpp/build.sh      # ggml's threads from OpenMP (llama.cpp's default)
#
# OPENMP=off (the default for verdict's libraries) runs ggml's graph on its
# own thread pool; OPENMP=on on libgomp, as llama.cpp's CMake does by
# default. On the 2-core machines of this project ggml's own pool is
# faster (README, Performance); the prefix of a build without OpenMP ends
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
LLAMA_DIR="${LLAMA_DIR:-${DATA:-.verdict}/llama.cpp}"
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
		echo "llama.cpp build: installing cmake and ninja-build with apt-get" >&2
		apt-get update -qq >&2 && apt-get install -y -qq cmake ninja-build >&2
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
if [ -f "$prefix/.verdict-built" ] && [ "$(cat "$prefix/.verdict-built")" = "${flags[*]}" ]; then
	echo "$prefix"
	exit 0
fi
build="$prefix.build"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
echo "llama.cpp build: cmake ${flags[*]}" >&2
start=$(date +%s)
cmake -S "$src" -B "$build" "${gen[@]}" "${flags[@]}" "-DCMAKE_INSTALL_PREFIX=$prefix" >"$build.log" 2>&1 ||
	{ tail -40 "$build.log" >&2; exit 1; }
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
	cmake --build "$build" -j "$JOBS" --target "${targets[@]}" >>"$build.log" 2>&1 || { tail -40 "$build.log" >&2; exit 1; }
	mkdir -p "$prefix/bin"
	cp -f "$build/bin/llama-server" "$prefix/bin/llama-server"
	if [ "$LINK" = dynamic ]; then
		cp -a "$build"/bin/*.so* "$prefix/bin/"
	fi
	echo "${flags[*]}" >"$prefix/.verdict-built"
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
cmake --build "$build" -j "$JOBS" --target "${targets[@]}" >>"$build.log" 2>&1 || { tail -40 "$build.log" >&2; exit 1; }
cmake --install "$build" >>"$build.log" 2>&1 || { tail -40 "$build.log" >&2; exit 1; }
# ggml installs backend modules into bin/; verdict loads them from beside
# libggml, so they go to lib/ with the libraries.
if [ "$LINK" = dynamic ]; then
	for m in "$prefix"/bin/libggml-*.so; do
		[ -e "$m" ] && mv -f "$m" "$prefix/lib/"
	done
fi
# Everything cgo needs to link, in link order, for the Makefile.
# Backend modules (dynamic) are loaded at run time, never linked.
libs=""
for l in llama ggml ggml-cpu ggml-cuda ggml-base; do
	if [ -f "$prefix/lib/lib$l.a" ]; then
		libs="$libs -l$l"
	elif [ -f "$prefix/lib/lib$l.so" ] && [ "$LINK" = dynamic ] && [[ $l != ggml-cpu && $l != ggml-cuda ]]; then
		libs="$libs -l$l"
	fi
done
if [ "$GPU" = cuda ] && [ "$LINK" = static ]; then
	libs="$libs -lcudart -lcublas -lcublasLt -lcuda"
fi
echo "$libs" >"$prefix/link-libs"
# The pin, for the binary to report (route_upstream.go includes it).
cat >"$prefix/include/verdict-pin.h" <<H
#define VERDICT_LLAMA_PIN_TAG "$(sed -n 's/^tag=//p' "$here/pin")"
#define VERDICT_LLAMA_PIN_TREE "$TREE"
H
echo "${flags[*]}" >"$prefix/.verdict-built"
echo "llama.cpp build: done in $(($(date +%s) - start)) s into $prefix" >&2
echo "$prefix"
