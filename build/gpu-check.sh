#!/usr/bin/env bash
# The device check: run from an unpacked GPU bundle (make gpu-bundle) on a GPU
# machine that has the CUDA toolkit and CMake but no Go. It builds the CUDA
# backend, writes the test and benchmark models, runs every llama.cpp-backed
# test with all layers offloaded (the GPU test mode), measures how close the
# GPU comes to the float64 reference with and without TF32, and runs
# llamabench on the small and the 1B benchmark models. About 6-8 minutes on
# 16 cores.
#
# usage: ./gpu-check.sh [OUT_DIR]         (default: ./out)
#   OUT_DIR gets check.log (everything, with a summary at the end),
#   backend-build.log, models.log and each llamabench run's JSON and chart.
# environment:
#   LLAMALOOP_CHECK_BACKEND   cuda (default), or cpu to rehearse the whole
#                             check on a machine without a GPU
#   LLAMALOOP_TEST_GPU_LAYERS layers the tests offload (default -1: all;
#                             0 with the cpu rehearsal)
#   LLAMALOOP_CHECK_BENCH     the llamabench runs: "small 1b" (default)
#   CUDA_ARCH                 native (default), or e.g. 90
# It exits non-zero when a step fails, after saying which.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
backend=${LLAMALOOP_CHECK_BACKEND:-cuda}
if [ "$backend" = cpu ]; then layers=${LLAMALOOP_TEST_GPU_LAYERS:-0}; else layers=${LLAMALOOP_TEST_GPU_LAYERS:--1}; fi
log=$out/check.log
: >"$log"
start=$SECONDS
failures=()

say() { echo "[$((SECONDS - start))s] $*" | tee -a "$log"; }
fail() {
	say "FAILED: $*"
	say "check: stopped after $((SECONDS - start)) s; logs in $out"
	exit 1
}

[ -d "$here/bin" ] && [ -d "$here/tests" ] && [ -d "$here/cmake-src" ] ||
	fail "$here is not an unpacked GPU bundle (make gpu-bundle writes one)"
say "llamaloop GPU check: backend $backend, test layers $layers, $(nproc) cores, $(uname -m)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log"

# The models do not need the backend: write them while it compiles.
"$here/bin/mkmodels" -out "$here/models" -bench >"$out/models.log" 2>&1 &
models_pid=$!

say "building the $backend backend (backend-build.log)"
if ! "$here/backend.sh" "$backend" "$here/cmake-src" "$here/lib" "${CUDA_ARCH:-native}" >"$out/backend-build.log" 2>&1; then
	tail -n 15 "$out/backend-build.log" | tee -a "$log"
	kill "$models_pid" 2>/dev/null
	fail "building the $backend backend (the lines above end backend-build.log)"
fi
tail -n 2 "$out/backend-build.log" | tee -a "$log"
readelf -d "$here"/lib/libggml-*.so | grep -i 'path' | sort -u | tee -a "$log"
export LLAMALOOP_BACKEND_DIR=$here/lib

say "writing the models (models.log)"
wait "$models_pid" || fail "writing the models (see models.log)"
ls -l "$here/models" >>"$log"

# A backend folder copied elsewhere still loads: libggml-*.so find
# libggml-base.so through $ORIGIN.
moved=$(mktemp -d)
cp -a "$here/lib/." "$moved/"
LLAMALOOP_BACKEND_DIR=$moved "$here/bin/llamagen" -m "$here/models/demo.gguf" -p "The model" --max-new-tokens 8 --threads 4 >>"$log" 2>&1 ||
	failures+=("llamagen with the backend folder moved")
rm -rf "$moved"

say "GPU test mode: every llama.cpp-backed test, LLAMALOOP_TEST_GPU_LAYERS=$layers"
for bin in "$here"/tests/*.test; do
	name=$(basename "$bin" .test)
	dir=$here/src/${name//_//}
	[ -d "$dir" ] || dir=$here/src
	t0=$SECONDS
	if (cd "$dir" && LLAMALOOP_TEST_GPU_LAYERS=$layers LLAMALOOP_TEST_BIN_DIR=$here/bin \
		LLAMALOOP_BENCH_MODEL=$here/models/bench-small-q8_0.gguf \
		"$bin" -test.count=1 -test.timeout=5m -test.v >"$out/test.tmp" 2>&1); then
		say "ok   $name ($((SECONDS - t0)) s, $(grep -c '^--- PASS' "$out/test.tmp") passed, $(grep -c '^--- SKIP' "$out/test.tmp") skipped)"
	else
		say "FAIL $name ($((SECONDS - t0)) s)"
		grep -E '^(--- FAIL|panic|FAIL|SIGSEGV|fatal)|Error Trace|Error:|llamatest' "$out/test.tmp" | head -n 40 | tee -a "$log"
		failures+=("tests of $name")
	fi
	grep -E 'largest \|llama.cpp - reference\||log-prob' "$out/test.tmp" | sed 's/^/     /' | tee -a "$log"
	cat "$out/test.tmp" >>"$out/tests.log"
done
rm -f "$out/test.tmp"

if [ "$backend" = cuda ]; then
	# Is TF32 (cuBLAS's math mode in ggml-cuda) what costs f32 weights their
	# accuracy? NVIDIA_TF32_OVERRIDE=0 turns it off in cuBLAS, not in ggml's
	# own tensor-core kernels.
	say "reference comparison with NVIDIA_TF32_OVERRIDE=0"
	(cd "$here/src/llamacpp" && NVIDIA_TF32_OVERRIDE=0 LLAMALOOP_TEST_GPU_LAYERS=$layers \
		"$here/tests/llamacpp.test" -test.count=1 -test.run 'Reference' -test.v 2>&1) |
		grep -E 'largest \|llama.cpp - reference\|' | sed 's/^/     /' | tee -a "$log"
fi

threads=$(nproc)
((threads > 8)) && threads=8
bench() { # name model reps
	say "llamabench $1"
	"$here/bin/llamabench" -m "$2" -r "$3" --threads "$threads" --bandwidth-mb 0 --json "$out/bench-$1.json" --chart "$out/bench-$1.svg" \
		>>"$log" 2>"$out/bench.err" || { cat "$out/bench.err" >>"$log"; failures+=("llamabench $1"); }
	rm -f "$out/bench.err"
}
for b in ${LLAMALOOP_CHECK_BENCH:-small 1b}; do
	case $b in
	small) bench small "$here/models/bench-small-q8_0.gguf" 3 ;;
	1b) bench 1b "$here/models/bench-1b-q4_0.gguf" 3 ;;
	*) failures+=("unknown llamabench run $b") ;;
	esac
done
mv "$out/tests.log" "$out/tests.log.txt" 2>/dev/null

if ((${#failures[@]})); then
	say "check: $((SECONDS - start)) s; FAILED: ${failures[*]}"
	exit 1
fi
say "check: $((SECONDS - start)) s; every step passed"
