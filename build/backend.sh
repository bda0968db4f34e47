#!/usr/bin/env bash
# Builds one ggml GPU backend from the pinned ollama module's sources as a
# shared library that llamaloop loads at run time (LLAMALOOP_BACKEND_DIR).
# usage: build-gpu-backend.sh cuda|metal MODULE_DIR OUT_DIR [CUDA_ARCH]
set -euo pipefail
kind=${1:?backend: cuda or metal}
src=${2:?module directory}
out=${3:?output directory}
arch=${4:-native}
command -v cmake >/dev/null || { echo "cmake is required (apt-get install cmake)" >&2; exit 1; }
build="build/$kind"
case "$kind" in
cuda)
	command -v nvcc >/dev/null || { echo "nvcc not found: install the CUDA toolkit" >&2; exit 1; }
	cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch"
	cmake --build "$build" --target ggml-cuda -j "$(nproc)"
	;;
metal)
	cat <<'MSG'
On macOS the Metal backend is compiled into ggml by CMake (GGML_METAL=ON, the
default on Apple). Build it from the module the same way:
  cmake -S "$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)" -B build/metal -DCMAKE_BUILD_TYPE=Release
  cmake --build build/metal --target ggml-metal -j
then copy build/metal/lib/ollama/libggml-metal.* into build/lib and set
LLAMALOOP_BACKEND_DIR. This recipe is untested on the project's Linux machines.
MSG
	exit 0
	;;
*)
	echo "unknown backend $kind" >&2
	exit 2
	;;
esac
mkdir -p "$out"
find "$build" -name "libggml-$kind*.so*" -exec cp -a {} "$out" \;
find "$build" -name "libggml-base*.so*" -exec cp -a {} "$out" \;
echo "built $(ls "$out")"
echo "run with LLAMALOOP_BACKEND_DIR=$(cd "$out" && pwd)"
