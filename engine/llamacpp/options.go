package llamacpp

import (
	"fmt"
	"math"
)

// Options configure an Engine. The zero value of a field means its default,
// given in the field's comment; a value given out of range is refused by
// New with an error naming the field, never adjusted.
type Options struct {
	// ModelPath is the GGUF file to load. Required.
	ModelPath string
	// SHA256, when set, pins the model: loading refuses a file whose sha256
	// differs. When empty, a manifest file beside the model
	// (<model>.sha256) is honoured if present. Defaults to no pin.
	SHA256 string
	// GPULayers is the number of layers to offload (-1 = all). Defaults to 0.
	GPULayers int
	// Mmap is "on" (map the model file: its pages are shared and loaded
	// on first use), "off" (read it into memory) or "auto": off on the CPU
	// (GPULayers 0) when this process's large allocations go on
	// transparent huge pages (hugepages.Malloc with glibc 2.35 or later,
	// what `verdict` arranges at start), where the weights then sit and
	// every decode reads them faster than from the mapped file's 4 KiB
	// pages (docs/performance.md); on otherwise. Defaults to "auto".
	Mmap string
	// Threads used for decoding. Defaults to the number of physical cores
	// (at most the CPUs this process may use).
	Threads int
	// ContextSize is n_ctx in tokens. Defaults to 8192.
	ContextSize int
	// BatchSize is n_batch, the most tokens one llama_decode takes; at
	// least MaxSequences. Defaults to 2048.
	BatchSize int
	// UBatchSize is n_ubatch, the physical micro-batch. Defaults to 512.
	UBatchSize int
	// MaxSequences is n_seq_max, the most KV sequences (branches) at once:
	// 3..256. Defaults to 128. For recurrent and hybrid models (qwen35, …)
	// every sequence holds a whole recurrent state, so the default is
	// RecurrentMemory divided by one sequence's measured state (8..128).
	MaxSequences int
	// RecurrentMemory is the memory budget in bytes for the recurrent
	// states of all sequences, used to size MaxSequences for recurrent and
	// hybrid models when it is not given. Defaults to 1 GiB.
	RecurrentMemory int64
	// MaxPending bounds decisions waiting for the decode loop; beyond it
	// Score returns engine.ErrBusy. Defaults to 1024.
	MaxPending int
	// Temperature divides option logits before the softmax. Defaults to 1.
	Temperature float64
	// PrefixCacheSlots is how many state prefixes stay resident in the KV
	// cache between requests; it must leave at least 2 of MaxSequences for
	// branches. Defaults to 16, or MaxSequences/2 when that is less.
	PrefixCacheSlots int
	// PrefixCacheTokens bounds the tokens held by cached prefixes; the
	// least recently used are evicted beyond it. Defaults to ContextSize/2,
	// except on the CPU with the kv store: min(1024, ContextSize/2).
	PrefixCacheTokens int
	// PrefixCacheStore is where cached prefixes wait between the
	// sub-rounds that use them: "kv" (resident in the KV memory), "host"
	// (saved to host memory and restored on a hit, so that no decode
	// attends over cells it does not need; not for recurrent or hybrid
	// models) or "auto": host on the CPU (GPULayers 0) for models without
	// recurrent layers, else kv. Defaults to "auto".
	PrefixCacheStore string
	// FlashAttention is "on", "off" or "auto" (the default), which is on,
	// on the CPU too (docs/performance.md).
	FlashAttention string
	// BranchBatchTokens bounds the question-suffix tokens decoded together
	// in one call. Branches of other sequences in the same call share the
	// KV cache and are masked out of each other's attention; a smaller
	// budget wastes less masked attention, a larger one amortizes more
	// per-call work. At most BatchSize. Defaults to BatchSize with flash
	// attention, else 128 (or BatchSize when that is less).
	BranchBatchTokens int
	// HeadBatchTokens bounds the new state-prefix tokens of distinct
	// states that one sub-round prefills together (the first state with
	// new tokens is taken whatever its length; states the prefix cache
	// holds add none). On the CPU one state's prefill already keeps the
	// cores busy, and every further state's cells are scanned by every
	// micro-batch of the call, so it defaults to 1 there: one fresh state
	// per sub-round (docs/performance.md). On a GPU, where batching pays,
	// it defaults to BranchBatchTokens.
	HeadBatchTokens int
	// NoPrefixCache drops every state prefix after use, so each request
	// starts from scratch (benchmarks' "fresh" mode). Defaults to false.
	NoPrefixCache bool
	// MaxRoundDecisions bounds the decisions the decode loop's queue takes
	// in from callers ahead of its sub-rounds; later ones wait, in order,
	// for room. Defaults to 256.
	MaxRoundDecisions int

	// recurrentModel is set by New once the model is loaded: defaults and
	// checks that depend on recurrent layers follow it.
	recurrentModel bool
}

// withDefaults fills every zero field with its default. Each default is
// one rule, below; a rule that reads another field runs after that field
// is resolved, so the order of the steps here is the order of their
// dependencies: sizes first, then the modes (mmap, flash attention, the
// prefix-cache store), then the budgets that follow from them.
func (o Options) withDefaults() Options {
	if o.Threads == 0 {
		o.Threads = physicalCores()
	}
	o.ContextSize = orDefault(o.ContextSize, 8192)
	o.BatchSize = orDefault(o.BatchSize, 2048)
	o.UBatchSize = orDefault(o.UBatchSize, 512)
	o.MaxSequences = orDefault(o.MaxSequences, 128)
	o.MaxPending = orDefault(o.MaxPending, 1024)
	o.RecurrentMemory = orDefault(o.RecurrentMemory, 1<<30)
	o.MaxRoundDecisions = orDefault(o.MaxRoundDecisions, 256)
	o.Temperature = orDefault(o.Temperature, 1)
	o.PrefixCacheSlots = orDefault(o.PrefixCacheSlots, defaultPrefixCacheSlots(o.MaxSequences))

	onCPU := o.GPULayers == 0
	o.Mmap = resolveMmap(o.Mmap, onCPU)
	o.FlashAttention = resolveFlashAttention(o.FlashAttention)
	o.PrefixCacheStore = resolvePrefixCacheStore(o.PrefixCacheStore, onCPU, o.recurrentModel)

	o.BranchBatchTokens = orDefault(o.BranchBatchTokens, defaultBranchBatchTokens(o.FlashAttention, o.BatchSize))
	o.HeadBatchTokens = orDefault(o.HeadBatchTokens, defaultHeadBatchTokens(onCPU, o.BranchBatchTokens))
	o.PrefixCacheTokens = orDefault(o.PrefixCacheTokens, defaultPrefixCacheTokens(onCPU, o.PrefixCacheStore, o.ContextSize))
	return o
}

// orDefault is v, or d when v is the zero value (not given).
func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// defaultPrefixCacheSlots keeps half the sequences for branches, and at
// most 16 prefixes.
func defaultPrefixCacheSlots(maxSequences int) int {
	return min(16, max(1, maxSequences/2))
}

// resolveMmap turns "auto" (or unset) into "off" on the CPU when this
// process's large allocations go on huge pages, where the weights read
// into memory then sit (docs/performance.md, huge pages); else "on".
func resolveMmap(mode string, onCPU bool) string {
	if mode != "" && mode != "auto" {
		return mode
	}
	if onCPU && hugeMalloc() {
		return "off"
	}
	return "on"
}

// resolveFlashAttention turns "auto" (or unset) into "on", on the CPU
// too: llama.cpp's flash attention skips the masked cells of other
// sequences in the unified KV cache, so it costs prefill nothing and
// speeds up shared-state and batched work (docs/performance.md;
// verdict bench --flash-attn).
func resolveFlashAttention(mode string) string {
	if mode == "" || mode == "auto" {
		return "on"
	}
	return mode
}

// resolvePrefixCacheStore turns "auto" (or unset) into "host" on the CPU
// for models without recurrent layers, else "kv". Resident cells are what
// costs the CPU: every decode scans the mask of every resident cell, so
// there cached prefixes wait in host memory between the sub-rounds that
// use them (restoring one is a copy; a decode attending over it is not).
// A recurrent state cannot be restored into a shared KV memory safely.
func resolvePrefixCacheStore(store string, onCPU, recurrent bool) string {
	if store != "" && store != "auto" {
		return store
	}
	if onCPU && !recurrent {
		return "host"
	}
	return "kv"
}

// defaultBranchBatchTokens is the batch with flash attention, and 128 (or
// the batch when less) without. In the unified KV cache every decode
// attends over every resident cell, masking out other sequences'; the
// plain path computes the masked cells, so every tail token of a call
// widens what each of the call's tokens attends over, which costs more
// than the call's fixed work saves (docs/performance.md). Flash attention
// skips masked tiles.
func defaultBranchBatchTokens(flashAttention string, batch int) int {
	if flashAttention == "off" {
		return min(128, batch)
	}
	return batch
}

// defaultHeadBatchTokens is 1 on the CPU: one fresh state per sub-round,
// since one state's prefill keeps the cores busy and every further
// state's cells are scanned by every micro-batch of the call
// (docs/performance.md). On a GPU, where batching pays, it is the branch
// budget.
func defaultHeadBatchTokens(onCPU bool, branchBatchTokens int) int {
	if onCPU {
		return 1
	}
	return branchBatchTokens
}

// defaultPrefixCacheTokens is half the context; on the CPU with the KV
// store, where every cached token stays resident and widens every
// decode, at most 1,024 of it.
func defaultPrefixCacheTokens(onCPU bool, store string, contextSize int) int {
	if onCPU && store == "kv" {
		return min(1024, contextSize/2)
	}
	return contextSize / 2
}

// OptionError is an option given out of range: Field is its name in
// Options, Problem what is wrong with the value. Commands map Field to
// their flag (one table, cmd/verdict's engineFlags).
type OptionError struct {
	Field, Problem string
}

func (e *OptionError) Error() string { return "llamacpp: Options." + e.Field + " " + e.Problem }

// FieldProblem is the field and what is wrong with it, for callers that
// name the field their own way (a command names its flag).
func (e *OptionError) FieldProblem() (field, problem string) { return e.Field, e.Problem }

func optionErr(field, format string, args ...any) error {
	return &OptionError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// validate names the first bad field of options with defaults filled in
// (defaults only replace zero values, so every value it refuses was given).
func (o Options) validate() error {
	switch {
	case o.ModelPath == "":
		return optionErr("ModelPath", "is required")
	case o.Threads < 1:
		return optionErr("Threads", "must be >= 1, got %d", o.Threads)
	case o.ContextSize < 64:
		return optionErr("ContextSize", "must be >= 64, got %d", o.ContextSize)
	case o.BatchSize < 1:
		return optionErr("BatchSize", "must be >= 1, got %d", o.BatchSize)
	case o.UBatchSize < 1 || o.UBatchSize > o.BatchSize:
		return optionErr("UBatchSize", "must be 1..BatchSize (%d), got %d", o.BatchSize, o.UBatchSize)
	case o.MaxSequences < 3 || o.MaxSequences > 256:
		return optionErr("MaxSequences", "must be 3..256, got %d", o.MaxSequences)
	case o.BatchSize < o.MaxSequences:
		// llama.cpp reserves an output row per sequence within
		// n_batch and aborts the process when they do not fit.
		return optionErr("BatchSize", "must be >= MaxSequences (%d), got %d", o.MaxSequences, o.BatchSize)
	case o.ContextSize < o.MaxSequences:
		return optionErr("ContextSize", "must be >= MaxSequences (%d) (n_batch is at most n_ctx), got %d", o.MaxSequences, o.ContextSize)
	case o.PrefixCacheSlots < 1 || o.PrefixCacheSlots > o.MaxSequences-2:
		return optionErr("PrefixCacheSlots", "must be 1..MaxSequences-2 (%d), leaving 2 branch sequences, got %d", o.MaxSequences-2, o.PrefixCacheSlots)
	case o.PrefixCacheTokens < 0:
		return optionErr("PrefixCacheTokens", "must be >= 0, got %d", o.PrefixCacheTokens)
	case o.HeadBatchTokens < 1:
		return optionErr("HeadBatchTokens", "must be >= 1, got %d", o.HeadBatchTokens)
	case o.BranchBatchTokens < 1 || o.BranchBatchTokens > o.BatchSize:
		return optionErr("BranchBatchTokens", "must be 1..BatchSize (%d), got %d", o.BatchSize, o.BranchBatchTokens)
	case o.MaxRoundDecisions < 1:
		return optionErr("MaxRoundDecisions", "must be >= 1, got %d", o.MaxRoundDecisions)
	case o.RecurrentMemory < 0:
		return optionErr("RecurrentMemory", "must be > 0, got %d", o.RecurrentMemory)
	case o.MaxPending < 1:
		return optionErr("MaxPending", "must be >= 1, got %d", o.MaxPending)
	case o.PrefixCacheStore != "kv" && o.PrefixCacheStore != "host":
		return optionErr("PrefixCacheStore", "must be auto, kv or host, got %q", o.PrefixCacheStore)
	case o.PrefixCacheStore == "host" && o.recurrentModel:
		return optionErr("PrefixCacheStore", "host is not for models with recurrent layers (a recurrent state cannot be restored into a shared KV memory safely); use kv or auto")
	case o.Mmap != "on" && o.Mmap != "off":
		return optionErr("Mmap", "must be auto, on or off, got %q", o.Mmap)
	case o.FlashAttention != "" && o.FlashAttention != "auto" && o.FlashAttention != "on" && o.FlashAttention != "off":
		return optionErr("FlashAttention", "must be auto, on or off, got %q", o.FlashAttention)
	case o.GPULayers < -1:
		return optionErr("GPULayers", "must be -1 (all) or >= 0, got %d", o.GPULayers)
	case o.Temperature < 0 || math.IsNaN(o.Temperature) || math.IsInf(o.Temperature, 0):
		return optionErr("Temperature", "must be a finite number > 0, got %v", o.Temperature)
	}
	return nil
}

// WithDefaults returns the options with every default filled in.
func (o Options) WithDefaults() Options { return o.withDefaults() }
