#!/usr/bin/env bash
# Checks a llama.cpp installed with CMake (cmake --install, prefix DIR: include/, lib/) for what
# llamaloop's cgo layer needs, and prints the cgo flags that build it against that install:
#   CGO_CPPFLAGS|CGO_LDFLAGS       (one line, the two separated by '|'; the Makefile splits it)
# On an install it cannot build against it prints one line, "llamaloop: ...", to stderr and exits 1:
# the first function or field llamaloop uses that the headers lack, or the library that is missing.
#   usage: build/llama-probe.sh DIR
# The function names come from the cgo layer itself (C.llama_*, C.ggml_* in cgo/*.go, and the calls
# in cgo/shim.c), so a new call is probed without a change here. compat.h says what the macros mean.
set -euo pipefail
shopt -s nullglob
export LC_ALL=C # the compilers' messages in ASCII quotes, which the errors below are parsed by
dir=${1:?usage: llama-probe.sh DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
supported="supported: llama.cpp ec98e2002 (December 2025, the pinned module's) to 3f545becc (master of 2026-08-22)"
fail() { echo "llamaloop: $*" >&2; exit 1; }

[ -f "$dir/include/llama.h" ] || fail "no include/llama.h under LLAMA_CPP=$dir (want the prefix of llama.cpp's cmake --install)"
# Absolute, as cgo compiles in the package's folder and a shared install's rpath must hold from anywhere.
dir=$(cd "$dir" && pwd)
lib=
for d in "$dir/lib" "$dir/lib64"; do
  if compgen -G "$d/libllama.*" >/dev/null; then lib=$d; break; fi
done
[ -n "$lib" ] || fail "no libllama under $dir/lib or $dir/lib64 (want the prefix of llama.cpp's cmake --install)"
# llamaloop links the CPU backend (ggml_backend_cpu_reg). GGML_BACKEND_DL=ON builds each backend as a
# module that ggml loads at run time (into bin/, with the CPU variants), which leaves nothing to link.
grep -qsiE 'set\(GGML_BACKEND_DL "(on|1|true|yes|y)"\)' "$lib/cmake/ggml/ggml-config.cmake" &&
  fail "the llama.cpp in $dir is built with GGML_BACKEND_DL=ON (backends as modules loaded at run time): llamaloop links the CPU backend, so build it with -DGGML_BACKEND_DL=OFF (CMake's default)"
compgen -G "$lib/libggml-cpu.*" >/dev/null ||
  fail "no libggml-cpu in $lib: llamaloop links ggml's CPU backend (want llama.cpp built with GGML_CPU=ON and GGML_BACKEND_DL=OFF, CMake's defaults)"

CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inc="-I$dir/include"

# Every llama_ and ggml_ function the cgo layer calls; typedefs (llama_token(x) is a conversion in
# Go) and the calls compat.h makes optional are not functions to probe.
optional=" llama_version "
names=$( { grep -ohE 'C\.(llama|ggml)_[a-z0-9_]+\(' "$here"/cgo/*.go | sed 's/^C\.//; s/($//'
           grep -ohE '\b(llama|ggml)_[a-z0-9_]+ *\(' "$here/cgo/shim.c" | sed 's/ *($//'; } | sort -u)
{
  echo '#include "llama.h"'
  echo '#include "ggml-backend.h"'
  echo '#include "ggml-cpu.h"'
  echo 'void llamaloop_probe(void) {'
  for n in $names; do
    case "$optional" in *" $n "*) continue ;; esac
    grep -qE "typedef[^;]*\b$n;" "$dir"/include/*.h && continue
    echo "  (void) &$n;"
  done
  echo '  struct llama_model_params m; (void) m.n_gpu_layers; (void) m.vocab_only; (void) m.check_tensors; (void) m.progress_callback; (void) m.progress_callback_user_data;'
  echo '  struct llama_context_params c; (void) c.n_ctx; (void) c.n_batch; (void) c.n_ubatch; (void) c.n_seq_max; (void) c.n_threads; (void) c.n_threads_batch;'
  echo '  (void) c.flash_attn_type; (void) c.type_k; (void) c.type_v; (void) c.kv_unified; (void) c.offload_kqv; (void) c.no_perf; (void) c.embeddings; (void) c.pooling_type;'
  echo '  struct llama_batch b; (void) b.embd; (void) b.logits;'
  echo '  (void) GGML_BACKEND_DEVICE_TYPE_IGPU; (void) LLAMA_FTYPE_MOSTLY_Q4_K_M;'
  echo '}'
} >"$tmp/probe.c"
if ! "$CC" -fsyntax-only -Werror=implicit-function-declaration $inc "$tmp/probe.c" 2>"$tmp/err"; then
  what=$(grep -m1 -oE "'[a-z0-9_]+' undeclared|has no member named '[a-z0-9_]+'|[a-z0-9_.-]+\.h: No such file" "$tmp/err" || true)
  case "$what" in
    *undeclared) fail "the llama.cpp in $dir declares no ${what%% undeclared}, which llamaloop calls ($supported)" ;;
    *member*) fail "the llama.cpp in $dir has no field ${what##*named } that llamaloop sets ($supported)" ;;
    *"No such file") fail "the llama.cpp in $dir lacks the header ${what%%:*} ($supported)" ;;
    *) fail "llama.cpp's headers in $dir do not compile: $(grep -m1 error "$tmp/err") ($supported)" ;;
  esac
fi

# The generations of the C API (compat.h).
compiles() { printf '#include "llama.h"\nvoid llamaloop_probe(void) { %s }\n' "$1" >"$tmp/gen.c"
  "$CC" -fsyntax-only -Werror $inc "$tmp/gen.c" 2>/dev/null; }
defs="-DLLAMALOOP_EXTERNAL -DLLAMALOOP_PROBED"
if compiles 'struct llama_model_params p; p.load_mode = LLAMA_LOAD_MODE_MMAP_MLOCK; (void) p;'; then
  defs="$defs -DLLAMALOOP_LOAD_MODE"
elif ! compiles 'struct llama_model_params p; p.use_mmap = 1; p.use_mlock = 0; (void) p;'; then
  fail "the llama.cpp in $dir has neither llama_model_params.load_mode nor use_mmap ($supported)"
fi
if compiles 'struct llama_sampler * (*f)(int32_t, int32_t, float, float, float) = llama_sampler_init_penalties; (void) f;'; then
  defs="$defs -DLLAMALOOP_PENALTIES_N_VOCAB"
elif ! compiles 'struct llama_sampler * (*f)(int32_t, float, float, float) = llama_sampler_init_penalties; (void) f;'; then
  fail "the llama.cpp in $dir has a llama_sampler_init_penalties of neither known signature ($supported)"
fi
compiles '(void) &llama_version;' && defs="$defs -DLLAMALOOP_HAS_VERSION"

# The libraries, in link order: llama, then ggml (the registry), its backends, ggml-base.
libs="-L$lib -lllama -lggml"
for f in "$lib"/libggml-*; do
  n=$(basename "$f"); n=${n#lib}; n=${n%%.*}
  case "$n" in ggml-base) ;; *) case " $libs " in *" -l$n "*) ;; *) libs="$libs -l$n" ;; esac ;; esac
done
libs="$libs -lggml-base"
if compgen -G "$lib/libllama.a" >/dev/null && ! compgen -G "$lib/libllama.so*" >/dev/null && ! compgen -G "$lib/libllama*.dylib" >/dev/null; then
  # A static install: what its libraries need from the system.
  grep -qas 'GOMP_' "$lib"/libggml*.a && libs="$libs -fopenmp" # a CPU backend built with OpenMP (ggml's default)
  case " $libs " in *" -lggml-cuda "*) libs="$libs -L${CUDA_HOME:-/usr/local/cuda}/lib64 -lcudart -lcublas -lcublasLt -lcuda" ;; esac
  case " $libs " in *" -lggml-metal "*) libs="$libs -framework Foundation -framework Metal -framework MetalKit" ;; esac
  libs="$libs -lstdc++ -lm -lpthread"
else
  # A shared install: found at run time through the rpath, from any folder. On ELF as DT_RPATH, which
  # also serves the libraries' own dependencies (CMake installs them without one): a backend that
  # libggml loads and the program never calls (libggml-cuda.so under --as-needed) is found there too.
  libs="$libs -Wl,-rpath,$lib"
  [ "$(uname -s)" = Darwin ] || libs="$libs -Wl,--disable-new-dtags"
  defs="$defs -DLLAMALOOP_SHARED=1"
fi
echo "$defs $inc|$libs"
