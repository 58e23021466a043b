// Package llamacpp is verdict's engine on llama.cpp. It compiles the
// engine only with the "llamacpp" build tag (set by the Makefile together
// with the include paths and -march flags); without the tag, New returns
// engine.ErrNoEngine.
//
// Two layers:
//
//   - The binding, package internal/llama (Model, Context, Batch), wraps
//     llama.h: loading, tokenizing, batches, decode, logits and KV-sequence
//     operations. It is the only package with cgo, and being internal,
//     nothing outside this engine reaches C. C types never leave it; every
//     id and range is checked in Go before a call that would otherwise hit
//     a GGML_ASSERT and abort the process.
//   - The Engine owns one context from one goroutine. Score may be called
//     from many goroutines: callers render and tokenize their decisions,
//     then hand them to the decode loop through a bounded queue (beyond it,
//     engine.ErrBusy). The loop takes everything waiting, prefills each
//     distinct state prefix once (reusing cached prefixes from earlier
//     requests), copies it into one branch sequence per decision and decodes
//     all the question suffixes together, reading logits only at each
//     suffix's last token.
package llamacpp
