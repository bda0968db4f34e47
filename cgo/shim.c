#include "shim.h"
#if !defined(LLAMALOOP_EXTERNAL)
#include "../tools/mtmd/mtmd.h"
#endif
#include "_cgo_export.h"
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#include <dlfcn.h>
#endif

static volatile int llamaloop_log_min = GGML_LOG_LEVEL_NONE + 100; // nothing until Go asks
static __thread int llamaloop_log_last = GGML_LOG_LEVEL_INFO;
static __thread uintptr_t llamaloop_log_capture = 0; // set during a model load

static void llamaloop_log_cb(enum ggml_log_level level, const char * text, void * user_data) {
	(void) user_data;
	int lvl = (int) level;
	if (lvl == GGML_LOG_LEVEL_CONT) {
		lvl = llamaloop_log_last;
	} else {
		llamaloop_log_last = lvl;
	}
	if (llamaloop_log_capture != 0 && lvl >= GGML_LOG_LEVEL_WARN && text != NULL) {
		llamaloopGoCapture(llamaloop_log_capture, (char *) text);
	}
	if (lvl < llamaloop_log_min || text == NULL) {
		return;
	}
	llamaloopGoLog(lvl, (char *) text);
}

void llamaloop_log_install(void) { llama_log_set(llamaloop_log_cb, NULL); }

int llamaloop_log_install_lib(const char * path) {
	void * h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (h == NULL) {
		return 0;
	}
	typedef void (*log_set_fn)(ggml_log_callback, void *);
	log_set_fn set = (log_set_fn) dlsym(h, "ggml_log_set");
	if (set != NULL) {
		set(llamaloop_log_cb, NULL);
	}
	dlclose(h); // the backend that loaded it keeps its own reference
	return set != NULL;
}

void llamaloop_log_set_min(int level) { llamaloop_log_min = level; }

void llamaloop_model_params_set_load(struct llama_model_params * p, bool mmap, bool mlock) {
#if defined(LLAMALOOP_LOAD_MODE)
	p->load_mode = mmap ? (mlock ? LLAMA_LOAD_MODE_MMAP_MLOCK : LLAMA_LOAD_MODE_MMAP) : (mlock ? LLAMA_LOAD_MODE_MLOCK : LLAMA_LOAD_MODE_NONE);
#else
	p->use_mmap = mmap;
	p->use_mlock = mlock;
#endif
}

void llamaloop_model_params_get_load(const struct llama_model_params * p, bool * mmap, bool * mlock) {
#if defined(LLAMALOOP_LOAD_MODE)
	enum llama_load_mode m = p->load_mode;
	*mmap = m == LLAMA_LOAD_MODE_AUTO || m == LLAMA_LOAD_MODE_MMAP || m == LLAMA_LOAD_MODE_MMAP_MLOCK;
	*mlock = m == LLAMA_LOAD_MODE_MLOCK || m == LLAMA_LOAD_MODE_MMAP_MLOCK;
#else
	*mmap = p->use_mmap;
	*mlock = p->use_mlock;
#endif
}

struct llama_sampler * llamaloop_sampler_init_penalties(int32_t n_vocab, int32_t last_n, float repeat, float freq, float present) {
#if defined(LLAMALOOP_PENALTIES_N_VOCAB)
	return llama_sampler_init_penalties(n_vocab, last_n, repeat, freq, present);
#else
	(void) n_vocab;
	return llama_sampler_init_penalties(last_n, repeat, freq, present);
#endif
}

const char * llamaloop_version(void) {
#if defined(LLAMALOOP_HAS_VERSION)
	return llama_version();
#else
	return "";
#endif
}

static bool llamaloop_progress_cb(float progress, void * user_data) {
	return llamaloopGoProgress(progress, (uintptr_t) user_data);
}

struct llama_model * llamaloop_model_load(const char * path, struct llama_model_params params, uintptr_t handle, uintptr_t capture) {
	if (handle != 0) {
		params.progress_callback = llamaloop_progress_cb;
		params.progress_callback_user_data = (void *) handle;
	} else {
		// llama.cpp's default callback prints dots to the log; stay quiet.
		params.progress_callback = NULL;
	}
	llamaloop_log_capture = capture;
	struct llama_model * model = llama_model_load_from_file(path, params);
	llamaloop_log_capture = 0;
	return model;
}

// ---- deferred backend frees (see shim.h)

void __real_ggml_backend_free(ggml_backend_t backend);

static __thread bool llamaloop_deferring = false;
static __thread ggml_backend_t * llamaloop_deferred = NULL;
static __thread int llamaloop_n_deferred = 0;
static __thread int llamaloop_cap_deferred = 0;
static __thread int llamaloop_last_deferred = 0;

void __wrap_ggml_backend_free(ggml_backend_t backend) {
	if (!llamaloop_deferring || backend == NULL) {
		__real_ggml_backend_free(backend);
		return;
	}
	if (llamaloop_n_deferred == llamaloop_cap_deferred) {
		int cap = llamaloop_cap_deferred ? 2 * llamaloop_cap_deferred : 8;
		ggml_backend_t * grown = realloc(llamaloop_deferred, (size_t) cap * sizeof(ggml_backend_t));
		if (grown == NULL) {
			// Out of memory: freeing now is the old behaviour, still better than a leak.
			__real_ggml_backend_free(backend);
			return;
		}
		llamaloop_deferred = grown;
		llamaloop_cap_deferred = cap;
	}
	llamaloop_deferred[llamaloop_n_deferred++] = backend;
}

static void llamaloop_defer_begin(void) {
	llamaloop_deferring = true;
	llamaloop_n_deferred = 0;
}

static void llamaloop_defer_end(void) {
	llamaloop_deferring = false;
	for (int i = 0; i < llamaloop_n_deferred; i++) {
		__real_ggml_backend_free(llamaloop_deferred[i]);
	}
	llamaloop_last_deferred = llamaloop_n_deferred;
	llamaloop_n_deferred = 0;
	free(llamaloop_deferred);
	llamaloop_deferred = NULL;
	llamaloop_cap_deferred = 0;
}

struct llama_context * llamaloop_init_from_model(struct llama_model * model, struct llama_context_params params) {
	llamaloop_defer_begin();
	struct llama_context * ctx = llama_init_from_model(model, params);
	llamaloop_defer_end();
	return ctx;
}

void llamaloop_free(struct llama_context * ctx) {
	llamaloop_defer_begin();
	llama_free(ctx);
	llamaloop_defer_end();
}

int llamaloop_deferred_backend_frees(void) { return llamaloop_last_deferred; }

static bool llamaloop_abort_cb(void * data) {
	return __atomic_load_n((int32_t *) data, __ATOMIC_RELAXED) != 0;
}

void llamaloop_set_abort_flag(struct llama_context * ctx, int32_t * flag) {
	llama_set_abort_callback(ctx, flag ? llamaloop_abort_cb : NULL, flag);
}

llama_token llamaloop_sampler_sample_row(struct llama_sampler * smpl, const float * logits, int32_t n, llama_token_data * scratch) {
	for (int32_t i = 0; i < n; i++) {
		scratch[i].id = i;
		scratch[i].logit = logits[i];
		scratch[i].p = 0.0f;
	}
	llama_token_data_array cur = { scratch, (size_t) n, -1, false };
	llama_sampler_apply(smpl, &cur);
	if (cur.selected < 0 || cur.selected >= (int64_t) cur.size) {
		return -1;
	}
	llama_token tok = cur.data[cur.selected].id;
	llama_sampler_accept(smpl, tok);
	return tok;
}

struct llama_batch llamaloop_batch_init(int32_t n_tokens, int32_t n_seq_max, bool * ok) {
	struct llama_batch b;
	memset(&b, 0, sizeof(b));
	*ok = false;
	if (n_tokens < 1 || n_seq_max < 1) {
		return b;
	}
	size_t n = (size_t) n_tokens;
	b.token = malloc(sizeof(llama_token) * n);
	b.pos = malloc(sizeof(llama_pos) * n);
	b.n_seq_id = malloc(sizeof(int32_t) * n);
	b.seq_id = calloc(n + 1, sizeof(llama_seq_id *)); // NULL-terminated, as llama_batch_free expects
	b.logits = malloc(sizeof(int8_t) * n);
	bool good = b.token && b.pos && b.n_seq_id && b.seq_id && b.logits;
	for (size_t i = 0; good && i < n; i++) {
		b.seq_id[i] = malloc(sizeof(llama_seq_id) * (size_t) n_seq_max);
		good = b.seq_id[i] != NULL;
	}
	if (!good) {
		if (b.seq_id != NULL) {
			for (size_t i = 0; i < n && b.seq_id[i] != NULL; i++) {
				free(b.seq_id[i]);
			}
		}
		free(b.token);
		free(b.pos);
		free(b.n_seq_id);
		free(b.seq_id);
		free(b.logits);
		memset(&b, 0, sizeof(b));
		return b;
	}
	*ok = true;
	return b;
}

int llamaloop_malloc_trim(void) {
#if defined(__GLIBC__)
	return malloc_trim(0);
#else
	return 0;
#endif
}

struct ggml_threadpool * llamaloop_threadpool_new(struct ggml_threadpool_params * params, llamaloop_threadpool_free_fn * free) {
	typedef struct ggml_threadpool * (*new_fn)(struct ggml_threadpool_params *);
	new_fn make = ggml_threadpool_new;
	*free = ggml_threadpool_free;
	ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	if (dev != NULL) {
		ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
		new_fn m = (new_fn) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
		llamaloop_threadpool_free_fn f = (llamaloop_threadpool_free_fn) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
		if (m != NULL && f != NULL) {
			make = m;
			*free = f;
		}
	}
	return make(params);
}

void llamaloop_threadpool_free(llamaloop_threadpool_free_fn free, struct ggml_threadpool * tp) {
	if (tp != NULL) {
		free(tp);
	}
}

#if !defined(LLAMALOOP_EXTERNAL) // an installed llama.cpp carries no libmtmd (mtmd.go)
// llamaloop_mtmd_log_install routes the multimodal library's log (clip's and
// mtmd's, which keep a logger of their own) to llamaloop's callback.
void llamaloop_mtmd_log_install(void) { mtmd_log_set(llamaloop_log_cb, NULL); }

// clip_ctx frees its backends before its scheduler (ggml_backend_sched_free
// then reads them), as llama_free does: the same deferral, for mtmd_free and
// for an mtmd_init_from_file that fails halfway.
mtmd_context * llamaloop_mtmd_init_from_file(const char * path, const struct llama_model * model, struct mtmd_context_params params) {
	llamaloop_defer_begin();
	mtmd_context * ctx = mtmd_init_from_file(path, model, params);
	llamaloop_defer_end();
	return ctx;
}

void llamaloop_mtmd_free(mtmd_context * ctx) {
	llamaloop_defer_begin();
	mtmd_free(ctx);
	llamaloop_defer_end();
}
#endif
