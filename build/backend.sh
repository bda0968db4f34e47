#!/usr/bin/env bash
# Builds one ggml backend from the pinned ollama module's CMake project as a
# shared library that llamaloop loads at run time (LLAMALOOP_BACKEND_DIR), and
# copies it with the libggml-base.so it links into OUT_DIR. The libraries find
# each other through an $ORIGIN run path, so OUT_DIR can be moved or copied.
#
# usage: build/backend.sh cuda|cpu|metal SOURCE_DIR OUT_DIR [CUDA_ARCH]
#   SOURCE_DIR  the module's directory (go list -m -f '{{.Dir}}' github.com/ollama/ollama)
#               or a GPU bundle's cmake-src folder: it needs the top CMakeLists.txt
#               and ml/backend/ggml/ggml
#   cuda        libggml-cuda.so; needs the CUDA toolkit (nvcc) and CMake.
#               CUDA_ARCH: native (default) or a list such as 90 for H100/H200
#   cpu         the module's x86-64 CPU variants, libggml-cpu-x64.so (baseline),
#               -sse42, -sandybridge, -haswell (AVX2), -skylakex (AVX-512),
#               -icelake (AVX-512 VBMI/VNNI) and -alderlake (AVX-VNNI): loaded
#               beside a portable build, the best one this CPU runs computes
#               (native speed from one binary); also rehearses loading a
#               backend on machines without a GPU
#   metal       prints the macOS recipe (untested on the project's machines)
set -euo pipefail
kind=${1:?backend: cuda, cpu or metal}
src=${2:?source directory}
out=${3:?output directory}
arch=${4:-native}
build="${LLAMALOOP_CMAKE_BUILD_DIR:-build/cmake-$kind}"

fail() { echo "backend.sh: $*" >&2; exit 1; }

case "$kind" in
cuda)
	target=ggml-cuda
	command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || fail "nvcc not found: install the CUDA toolkit (or put /usr/local/cuda/bin on PATH)"
	[ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"
	extra=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
	;;
cpu)
	target=ggml-cpu
	# The module's CMake project adds ggml/src without ggml's options, so
	# GGML_CPU_REPACK (on in upstream's build and in the cgo flags) is off
	# unless it is asked for.
	extra=(-DGGML_CPU_REPACK=ON)
	;;
metal)
	cat <<'MSG'
On macOS the Metal backend is compiled into ggml by CMake (GGML_METAL=ON, the
default on Apple). Build it from the module the same way:
  cmake -S "$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)" -B build/cmake-metal -DCMAKE_BUILD_TYPE=Release
  cmake --build build/cmake-metal --target ggml-metal -j
then copy build/cmake-metal/lib/ollama/libggml-metal.* and libggml-base.* into
build/lib and set LLAMALOOP_BACKEND_DIR. This recipe is untested on the
project's Linux machines.
MSG
	exit 0
	;;
*)
	fail "unknown backend $kind (cuda, cpu or metal)"
	;;
esac
command -v cmake >/dev/null || fail "cmake not found (apt-get install cmake)"
[ -f "$src/CMakeLists.txt" ] && [ -d "$src/ml/backend/ggml/ggml/src" ] || fail "$src is not the ollama module's CMake project"

jobs=$(nproc 2>/dev/null || echo 2)
# Install-style run paths ($ORIGIN) already in the build tree; no Vulkan,
# which the project would otherwise pick up wherever its SDK is installed.
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' \
	-DCMAKE_DISABLE_FIND_PACKAGE_Vulkan=ON "${extra[@]}" \
	|| fail "cmake could not configure $src for $kind"
cmake --build "$build" --target "$target" -j "$jobs" || fail "building $target failed"

mkdir -p "$out"
found=0
libs=("$build"/lib/ollama/lib"$target".so*)
[ "$kind" = cpu ] && libs=("$build"/lib/ollama/libggml-cpu-*.so*)
for lib in "${libs[@]}" "$build"/lib/ollama/libggml-base.so*; do
	[ -e "$lib" ] || continue
	cp -a "$lib" "$out"/
	found=1
done
[ "$found" = 1 ] || fail "no lib$target.so under $build/lib/ollama"
check=lib$target.so
[ "$kind" = cpu ] && check=libggml-cpu-x64.so
readelf -d "$out/$check" | grep -q 'R.*PATH.*\$ORIGIN' || fail "$check has no \$ORIGIN run path"
echo "built $(cd "$out" && ls lib"$target"*.so* libggml-base.so* | tr '\n' ' ')in $out"
echo "run with LLAMALOOP_BACKEND_DIR=$(cd "$out" && pwd)"
