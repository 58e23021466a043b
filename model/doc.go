// Package model handles GGUF model files without loading them into an
// engine: it writes deterministic synthetic models for tests and benchmarks
// (Synth), reads a file's identity (Inspect), and pins files by sha256
// (manifest files, Verify).
//
// Synthetic models use the llama architecture and verdict's own
// SentencePiece vocabulary, built so that every word piece is reachable by
// pairwise merges (all prefixes of a piece are pieces too) and the option
// labels "▁A"…"▁Z" and "A"…"Z" are single tokens. Their weights are random,
// so their answers are meaningless; their shapes and costs are real.
package model
