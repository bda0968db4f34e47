#!/usr/bin/env bash
# Compiles and links llamaloop's commands and the llamacpp test binary for
# several x86-64 targets, whatever CPU builds them: a link failure (such as
# the AMX kernels' before cgo/amx.cpp) does not depend on the host. What the
# host can execute also runs: the demo and the precision tests of package
# llamacpp (batched against token-by-token logits, the float64 reference, the
# AMX buffer).
#
# usage: [CPU_VARIANTS=build/lib] build/check-arch.sh [TARGET ...]
#   CPU_VARIANTS  a folder of CPU variants (make cpu-variants): the portable
#                 target's tests run once more with them loaded
#   TARGET  a name below (default: all of them, in this order)
#     x86-64-v2       SSE4.2, no AVX: the oldest CPUs a release still meets
#     x86-64-v3       AVX2 and FMA (Haswell, Zen 1-3)
#     znver4          AVX-512 as AMD's Zen 4 has it (GCC 12 lacks -march=znver4:
#                     znver3 plus Zen 4's AVX-512 extensions)
#     sapphirerapids  AVX-512 and AMX (Intel Xeon 4th generation and later)
#     portable        make PORTABLE=1: the toolchain's baseline x86-64
# Each target keeps its own entries in Go's build cache: a cold one compiles
# llama.cpp (3-5 minutes on 2 cores), a warm one only links.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A flags=(
	[x86-64-v2]="-march=x86-64-v2"
	[x86-64-v3]="-march=x86-64-v3"
	[znver4]="-march=znver3 -mavx512f -mavx512dq -mavx512cd -mavx512bw -mavx512vl -mavx512ifma -mavx512vbmi -mavx512vbmi2 -mavx512vnni -mavx512bitalg -mavx512vpopcntdq -mavx512bf16 -mgfni -mvaes -mvpclmulqdq"
	[sapphirerapids]="-march=sapphirerapids"
	[portable]=""
)
targets=("$@")
((${#targets[@]})) || targets=(x86-64-v2 x86-64-v3 znver4 sapphirerapids portable)

# The ISA macros a target defines and this host's -march=native does not.
# Instructions that compilers emit only through intrinsics llama.cpp does not
# call (or, for AMX, calls only after ggml has asked the kernel for it at run
# time) do not stop a binary from running here.
runtime_checked='^__(AMX_[A-Z0-9]+|AVX512VP2INTERSECT|CLZERO|ENQCMD|MWAITX|PCONFIG|PKU|PTWRITE|SGX|SSE4A|UINTR|WAITPKG|WBNOINVD|BIGGEST_ALIGNMENT)__$'
isa_macros() { ${CC:-cc} "$@" -dM -E -x c /dev/null | awk '$1 == "#define" && $3 == "1" && $2 ~ /^__[A-Z0-9_]+__$/ {print $2}' | sort; }
host_lacks() {
	comm -23 <(isa_macros "$@") <(isa_macros -march=native) | grep -vE "$runtime_checked" || true
}

models=build/models
make -s models >/dev/null

failed=()
for t in "${targets[@]}"; do
	[[ -v flags[$t] ]] || { echo "check-arch: unknown target $t (${!flags[*]})" >&2; exit 2; }
	if [ "$t" = portable ]; then
		mk=(PORTABLE=1)
	else
		mk=("ARCH_FLAGS=${flags[$t]}")
	fi
	out=build/arch/$t
	mkdir -p "$out"
	echo "== $t: ${flags[$t]:-(no -march: the toolchain default)}"
	start=$SECONDS
	(
		eval "$(make -s env "${mk[@]}")"
		go build -o "$out/" ./cmd/... &&
			go test -c -o "$out/llamacpp.test" ./llamacpp/
	) >"$out/build.log" 2>&1 || { echo "   FAILED to build or link (see $out/build.log):"; grep -E 'error|undefined' "$out/build.log" | head -5 | sed 's/^/   /'; failed+=("$t"); continue; }
	echo "   compiled and linked in $((SECONDS - start)) s"
	# shellcheck disable=SC2086 # the flags are words
	lacks=$(host_lacks ${flags[$t]} | tr '\n' ' ')
	if [ -n "$lacks" ]; then
		echo "   not run: this CPU lacks ${lacks}"
		continue
	fi
	if ! "$out/llamagen" --demo -m "$models/demo.gguf" --threads 1 >"$out/demo.log" 2>&1; then
		echo "   demo FAILED (see $out/demo.log)"; failed+=("$t"); continue
	fi
	if ! (cd llamacpp && "../$out/llamacpp.test" -test.count=1 -test.v \
		-test.run 'TestQuantizeFileTypes|TestLogitsMatchReference|TestAMX') >"$out/test.log" 2>&1; then
		echo "   tests FAILED (see $out/test.log)"; failed+=("$t"); continue
	fi
	echo "   demo ran; tests passed:"
	grep -E 'largest|SKIP|skipped|AMX' "$out/test.log" | grep -v '^=== ' | sed 's/^ */   /' | head -12
	if [ "$t" = portable ] && [ -n "${CPU_VARIANTS:-}" ]; then
		# The portable build beside the CPU variants (make cpu-variants): the
		# best variant this CPU runs must compute, as exactly as the native build.
		dir=$(cd "$CPU_VARIANTS" && pwd)
		if ! (cd llamacpp && LLAMALOOP_BACKEND_DIR=$dir "../$out/llamacpp.test" -test.count=1 -test.v \
			-test.run 'TestCPUBackend|TestQuantizeFileTypes|TestLogitsMatchReference') >"$out/variants.log" 2>&1; then
			echo "   tests with the CPU variants in $dir FAILED (see $out/variants.log)"; failed+=("$t+variants"); continue
		fi
		echo "   with the CPU variants in $CPU_VARIANTS, tests passed:"
		grep -E 'computing with|largest' "$out/variants.log" | sed 's/^ */   /' | head -8
	fi
done
if ((${#failed[@]})); then
	echo "check-arch: failed: ${failed[*]}" >&2
	exit 1
fi
echo "check-arch: all targets built"
