#!/usr/bin/env bash
# Packs what a GPU machine without Go needs to check llamaloop there
# (build/gpu-check.sh): llamagen, llamabench, the model writer and the
# llama.cpp-backed test binaries, built for x86-64-v3 and stripped, the test
# data those tests read, and the pinned module's CMake project for the GPU
# backend. Run through `make gpu-bundle`, which passes the test packages.
#
# usage: build/gpu-bundle.sh MODULE_DIR OUT_DIR TEST_PACKAGE...
# writes OUT_DIR/ and OUT_DIR.tar.xz (the file to carry)
set -euo pipefail
module=${1:?module directory}
out=${2:?output directory}
shift 2
(($#)) || { echo "gpu-bundle.sh: no test packages given" >&2; exit 2; }
root=$(go list -m -f '{{.Dir}}')
prefix=$(go list -m)

# x86-64-v3 (AVX2, FMA, F16C): every x86 GPU server of the last decade; the
# GPU does the heavy work, so the CPU side needs no more.
export GOAMD64=v3 CGO_CFLAGS="-O3 -march=x86-64-v3" CGO_CXXFLAGS="-O3 -march=x86-64-v3"
strip=(-trimpath -ldflags='-s -w')

rm -rf "$out" "$out.tar.xz"
mkdir -p "$out"
out=$(cd "$out" && pwd)
mkdir -p "$out/bin" "$out/tests" "$out/src" "$out/cmake-src/ml/backend/ggml"
go build "${strip[@]}" -o "$out/bin/" ./cmd/llamagen ./cmd/llamabench ./internal/cmd/mkmodels
for pkg in "$@"; do
	rel=${pkg#"$prefix"/}
	name=${rel//\//_}
	go test -c "${strip[@]}" -o "$out/tests/$name.test" "$pkg"
	# Tests run in their package's folder and read its testdata (and, through
	# relative paths, other packages' testdata, copied below).
	mkdir -p "$out/src/$rel"
done
git -C "$root" ls-files -- '*/testdata/*' | while read -r f; do install -D -m 644 "$root/$f" "$out/src/$f"; done

cp "$module/CMakeLists.txt" "$out/cmake-src/"
cp -r "$module/ml/backend/ggml/ggml" "$out/cmake-src/ml/backend/ggml/"
chmod -R u+w "$out/cmake-src"
cp "$root/build/backend.sh" "$root/build/gpu-check.sh" "$out/"

tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
size=$(stat -c %s "$out.tar.xz")
echo "gpu bundle: $out.tar.xz, $((size / 1024 / 1024)) MiB ($(ls "$out/tests" | wc -l) test binaries)"
if ((size > 64 * 1024 * 1024)); then
	echo "gpu-bundle.sh: the bundle is over 64 MiB" >&2
	exit 1
fi
