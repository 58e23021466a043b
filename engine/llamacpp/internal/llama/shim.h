// C helpers of the binding that more than one cgo file includes.
#pragma once
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
#include "ggml-backend.h"

// verdict_load_backends loads ggml's backend modules from the folder that
// libggml itself was loaded from, when the CPU backend is not built in (a
// LINK=dynamic build: GGML_BACKEND_DL). Static builds register their CPU
// backend at compile time and load nothing here. Returns the number of
// registered backends.
static inline size_t verdict_load_backends(void) {
	if (ggml_backend_reg_by_name("CPU") != NULL) {
		return ggml_backend_reg_count();
	}
	Dl_info info;
	if (dladdr((void *)ggml_backend_load_all_from_path, &info) && info.dli_fname != NULL) {
		char *path = strdup(info.dli_fname);
		if (path != NULL) {
			ggml_backend_load_all_from_path(dirname(path));
			free(path);
		}
	}
	if (ggml_backend_reg_by_name("CPU") == NULL) {
		ggml_backend_load_all(); // the executable's folder and the working directory
	}
	return ggml_backend_reg_count();
}

static inline struct llama_model_params verdict_model_params(int n_gpu_layers, bool use_mmap) {
	struct llama_model_params p = llama_model_default_params();
	p.n_gpu_layers = n_gpu_layers;
	p.load_mode = use_mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
	return p;
}

// The CPU backend's persistent thread pool. Without one attached, ggml's
// CPU backend (built without OpenMP) starts and joins its worker threads
// for every graph it computes, that is for every micro-batch; a pool keeps
// them, polling briefly for the next graph before they sleep. The pool's
// functions live in the CPU backend, which a LINK=dynamic build loads as a
// module, so they are looked up through its registry.
typedef struct ggml_threadpool *(*verdict_threadpool_new_fn)(struct ggml_threadpool_params *);
typedef void (*verdict_threadpool_free_fn)(struct ggml_threadpool *);

static inline void *verdict_cpu_proc(const char *name) {
	ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	if (dev == NULL) {
		return NULL;
	}
	return ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), name);
}

// verdict_threadpool_new returns a pool of n_threads threads with ggml's
// default parameters (llama.cpp's tools use the same), or NULL.
static inline struct ggml_threadpool *verdict_threadpool_new(int n_threads) {
	verdict_threadpool_new_fn fn = (verdict_threadpool_new_fn)verdict_cpu_proc("ggml_threadpool_new");
	if (fn == NULL || n_threads < 1) {
		return NULL;
	}
	struct ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
	return fn(&p);
}

static inline void verdict_threadpool_free(struct ggml_threadpool *tp) {
	verdict_threadpool_free_fn fn = (verdict_threadpool_free_fn)verdict_cpu_proc("ggml_threadpool_free");
	if (fn != NULL && tp != NULL) {
		fn(tp);
	}
}

// verdict_glibc_at_least reports whether the C library is glibc of at least
// this version (its malloc tunables differ by release).
static inline bool verdict_glibc_at_least(int major, int minor) {
	int ma = 0, mi = 0;
	if (sscanf(gnu_get_libc_version(), "%d.%d", &ma, &mi) != 2) {
		return false;
	}
	return ma > major || (ma == major && mi >= minor);
}
