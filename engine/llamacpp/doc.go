// Package llamacpp is verdict's engine on llama.cpp. It compiles the
// engine when cgo is on (plain go build finds the pinned library through
// .verdict/llama, see internal/llama); without cgo, New returns
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
//   - The Engine (engine.go) owns one context from one goroutine, the
//     decode loop. Score may be called from many goroutines: callers
//     render and tokenize their decisions (prepare), then hand them to the
//     loop as one job through a bounded queue (beyond it, engine.ErrBusy),
//     and wait for the job to be answered.
//
// # Scheduling (scheduler.go)
//
// A decision's prompt is split into a head (everything up to the end of
// its state) and a tail (question, options, answer cue). The loop keeps
// waiting decisions grouped by head, groups in the order their first
// decision arrived (FIFO); a decision for a head that already waits joins
// its group, so the state is decoded once. Each pass takes the oldest
// groups as one sub-round (at most one group per prefix-cache slot, and
// new head tokens within HeadBatchTokens, the first fresh head whatever
// its length), runs it, answers every job whose decisions are all done,
// and admits what arrived meanwhile. No caller waits for work that
// arrived after it beyond the sub-round it shares.
//
// # Sub-rounds (subround.go, prefill.go, branches.go, labels.go)
//
// A sub-round first extends each group's head by what all its tails
// start with (sharedHead). One try of it then runs in two steps:
//
//   - prefill (a prefillRun) gives every head a cache sequence and decodes
//     what the prefix cache does not hold. The head's new tokens also go
//     into branch sequences of its decisions (fused), and its last batch
//     is left open for the first tails.
//   - decodeBranches gives each decision a branch sequence holding its
//     head (fused, or copied from the head's sequence) and decodes the
//     tails of many decisions together, reading logits only at each
//     tail's last token; multi-token labels are then scored in extra
//     branches (expandLabels).
//
// Every step checks its callers (checkCaller): a caller that gave up or
// an engine that is closing stops the decision, and work that nobody
// waits for is dropped within one decode call. A try that fails is
// retried once from scratch on a clean KV memory (each item's attempt is
// reset whole), then decision by decision, each alone, so that a failure
// stays with the decision that causes it.
//
// # Prefix cache (prefixcache.go)
//
// Heads are kept between sub-rounds in sequences [0, PrefixCacheSlots)
// and reused by longest common prefix, least recently used evicted. With
// the host store (the CPU default) an entry's cells leave the KV memory
// between the sub-rounds that use it and are restored on a hit, so that
// no decode attends over cells it does not read. Branch sequences are the
// rest, [PrefixCacheSlots, MaxSequences), taken and released per decision.
//
// Options (options.go) documents every knob and its default;
// docs/performance.md has the measurements behind the defaults.
package llamacpp
