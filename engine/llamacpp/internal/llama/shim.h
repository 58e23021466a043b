// Where the two llama.cpp routes' headers differ, the difference sits here.
// route_upstream.go defines VERDICT_LLAMA_UPSTREAM for the whole package.
#pragma once
#include <dlfcn.h>
#include <libgen.h>
#include <stdbool.h>
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
#ifdef VERDICT_LLAMA_UPSTREAM
	// v0.5.0 replaced the use_mmap flag with a load mode.
	p.load_mode = use_mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
#else
	p.use_mmap = use_mmap;
#endif
	return p;
}
