// Where the two llama.cpp routes' headers differ, the difference sits here.
// route_upstream.go defines VERDICT_LLAMA_UPSTREAM for the whole package.
#pragma once
#include <stdbool.h>
#include "llama.h"

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
