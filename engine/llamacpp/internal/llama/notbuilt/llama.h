/* Found only when the pinned llama.cpp is not built: the real llama.h
   comes first on the include path (.verdict/llama/include). */
#error "verdict: llama.cpp is not built. Run `make llama-lib` in the module root (it fetches the pinned release, builds it with CMake into ~/.cache/verdict/llama.cpp and links it at .verdict/llama), or `make build`."
