// Small C helpers for what cgo cannot express directly: callbacks into Go,
// an abort flag read without crossing into Go, and candidate arrays for
// llama.cpp's own samplers (used by benchmarks).
#ifndef LLAMALOOP_SHIM_H
#define LLAMALOOP_SHIM_H

#include <stdint.h>
#include <stdlib.h>
#include "llama.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "compat.h"

// Log forwarding: messages below the minimum level never cross into Go.
void llamaloop_log_install(void);
void llamaloop_mtmd_log_install(void);
void llamaloop_log_set_min(int level);
// Routes the log of a loaded library's own ggml-base copy (the libggml-base.so
// beside dynamically loaded backends) through the same callback; returns 0
// where the library is not loaded or has no ggml_log_set.
int llamaloop_log_install_lib(const char * path);

// How the model file is read: mmap and mlock, set on and read from the
// parameters whichever generation of llama_model_params this llama.cpp has
// (compat.h): a load_mode of AUTO reads as mmap.
void llamaloop_model_params_set_load(struct llama_model_params * p, bool mmap, bool mlock);
void llamaloop_model_params_get_load(const struct llama_model_params * p, bool * mmap, bool * mlock);

// llama_sampler_init_penalties; n_vocab goes to the generations that take it.
struct llama_sampler * llamaloop_sampler_init_penalties(int32_t n_vocab, int32_t last_n, float repeat, float freq, float present);

// llama_version where this llama.cpp has it, else "".
const char * llamaloop_version(void);

// Model loading with an optional progress callback into Go (handle != 0).
// With capture != 0, every warning and error that llama.cpp and ggml log on
// the loading thread during the load goes to Go's capture handler as well,
// whatever the minimum log level.
struct llama_model * llamaloop_model_load(const char * path, struct llama_model_params params, uintptr_t handle, uintptr_t capture);

// Context lifetime. The pinned ggml's ggml_backend_sched_free calls every
// backend's reset hook, but ~llama_context destroys its backends before its
// scheduler: a use after free that the CPU backend (no reset hook) hides and
// CUDA turns into a crash. These two calls run llama_init_from_model (whose
// failure path destroys a half-built context the same way) and llama_free
// with ggml_backend_free deferred until llama.cpp returns; the link wraps
// ggml_backend_free (-Wl,--wrap) to make that possible.
struct llama_context * llamaloop_init_from_model(struct llama_model * model, struct llama_context_params params);
void llamaloop_free(struct llama_context * ctx);

// The number of backend frees that the last llamaloop_free or
// llamaloop_init_from_model on this thread deferred (tests check the wrap).
int llamaloop_deferred_backend_frees(void);

// llama_batch_init without its unchecked mallocs: every array is checked,
// and on a failed allocation what was allocated is freed and *ok is false.
// The batch is freed by llama_batch_free like one of llama_batch_init.
struct llama_batch llamaloop_batch_init(int32_t n_tokens, int32_t n_seq_max, bool * ok);

// malloc_trim(0) where the C library has it (glibc): returns freed heap
// memory to the system. Returns 1 when it released memory, 0 otherwise or
// where unavailable.
int llamaloop_malloc_trim(void);

// The abort callback reads *flag atomically; Go sets it.
void llamaloop_set_abort_flag(struct llama_context * ctx, int32_t * flag);

// Builds the candidate array from a logits row, as llama_sampler_sample does,
// applies the sampler and returns the selected token.
llama_token llamaloop_sampler_sample_row(struct llama_sampler * smpl, const float * logits, int32_t n, llama_token_data * scratch);

// ggml_threadpool_new of the CPU backend that llama.cpp uses (the first CPU
// device's registry), or the built-in one where that registry offers none;
// *free receives the matching ggml_threadpool_free.
typedef void (*llamaloop_threadpool_free_fn)(struct ggml_threadpool *);
struct ggml_threadpool * llamaloop_threadpool_new(struct ggml_threadpool_params * params, llamaloop_threadpool_free_fn * free);
void llamaloop_threadpool_free(llamaloop_threadpool_free_fn free, struct ggml_threadpool * tp);

#endif
