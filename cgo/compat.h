// The generations of llama.cpp's C API that llamaloop compiles against.
//
// The pinned module's llama.cpp (ec98e2002) is the default and needs no
// macro. A llama.cpp the user installed (build tag llamacpp_external) is
// probed by build/llama-probe.sh, which the Makefile runs for
// LLAMA_CPP=DIR: it names any function llamaloop calls that the install
// lacks, and defines one macro per difference it found:
//   LLAMALOOP_LOAD_MODE          llama_model_params.load_mode replaces use_mmap and use_mlock
//   LLAMALOOP_PENALTIES_N_VOCAB  llama_sampler_init_penalties takes n_vocab first
//   LLAMALOOP_HAS_VERSION        llama_version() exists
//   LLAMALOOP_SHARED             1: linked as shared libraries, which -Wl,--wrap cannot reach into
// The functions of shim.c that take the place of the fields and calls that
// differ hide them from the Go files.
#ifndef LLAMALOOP_COMPAT_H
#define LLAMALOOP_COMPAT_H

#if defined(LLAMALOOP_EXTERNAL) && !defined(LLAMALOOP_PROBED)
#error "llamaloop: an external llama.cpp needs the flags of build/llama-probe.sh: build with make LLAMA_CPP=DIR, or eval \"$(make -s env LLAMA_CPP=DIR)\" first"
#endif

#ifndef LLAMALOOP_SHARED
#define LLAMALOOP_SHARED 0
#endif

#endif
