// Package gguf handles GGUF model files without loading them into an
// engine: it writes deterministic synthetic models for tests and benchmarks
// (Synth), reads a file's identity (Inspect), and pins files by sha256
// (manifest files, Verify).
//
// Synthetic models have the llama architecture (Shapes) or Qwen3.5's
// hybrid one, llama.cpp's "qwen35" (Qwen35Shapes): Gated-DeltaNet
// linear-attention layers with a gated full-attention layer every
// full_attention_interval-th layer. By default they carry verdict's own
// SentencePiece vocabulary, built so that every word piece is reachable by
// pairwise merges (all prefixes of a piece are pieces too) and the option
// labels "▁A"…"▁Z" and "A"…"Z" are single tokens; with SynthOptions.Vocab
// they carry a real model's tokenizer instead, copied key for key (types
// included) from a GGUF such as llama.cpp's models/ggml-vocab-qwen35.gguf
// (LoadVocab). Their weights are random, so their answers are meaningless;
// their shapes and costs are real.
package gguf
