//go:build cgo

// Package bench measures the engine on fixed workloads: how many tokens it
// avoids evaluating (shared state prefixes, cached prefixes, batching) and
// what that buys in decisions per second. `verdict bench` prints its table.
//
// Each workload runs in three modes on the same model:
//
//   - fresh: every decision from scratch, one at a time (no prefix cache);
//   - serial: one decision at a time, cached prefixes reused;
//   - parallel: all questions about a state in one call (fan-out), or for
//     independent decisions, 16 concurrent callers batched by the engine.
//
// Run (this file) picks the workloads; workloads.go builds them (W0's
// prompt, W1's shape-777, W2's JevBench-240 cases, W3's independent
// decisions); runs.go measures each in its modes, on engines of their
// own; rounds.go interleaves the modes in rounds and waits for a quiet
// machine before each; report.go turns the rounds into rows and prints
// the table. Package peer compares verdict serve with llama-server.
package bench

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/engine/llamacpp"
)

// Config says what to run.
type Config struct {
	// GPULayers is llamacpp.Options.GPULayers for every engine the bench
	// opens (0 = CPU; -1 = all layers on the GPU).
	GPULayers int
	// Model is the GGUF for W1–W3.
	Model string
	// PrefillModel is the GGUF for the prefill table (W0); empty skips it.
	PrefillModel string
	// Threads for W1–W3. Defaults to the number of CPUs.
	Threads int
	// PrefillThreads lists thread counts for W0. Defaults to 1 and 2.
	PrefillThreads []int
	// States is the number of W1 states. Defaults to 2.
	States int
	// Questions per W1 state. Defaults to 21.
	Questions int
	// StateTokens is the W1 state length. Defaults to Shape777StateTokens.
	StateTokens int
	// SuffixTokens is the W1 question suffix length. Defaults to
	// Shape777SuffixTokens.
	SuffixTokens int
	// JevBench is the cases.jsonl path for W2; empty or missing skips W2.
	JevBench string
	// JevLimit is the number of W2 cases. Defaults to 12.
	JevLimit int
	// Independent is the number of W3 decisions. Defaults to 64.
	Independent int
	// Clients lists the W3 concurrent-caller counts, one row each.
	// Defaults to 4 and 16.
	Clients []int
	// IndependentTokens is the W3 state length. Defaults to 200.
	IndependentTokens int
	// Workloads to run, by name (w0 w1 w2 w3). Defaults to all.
	Workloads []string
	// FlashAttention is passed to the engine ("auto", "on", "off").
	FlashAttention string
	// BranchBatchTokens is passed to the engine (0 = its default).
	BranchBatchTokens int
	// PrefixCacheTokens is passed to the engine (0 = its default).
	PrefixCacheTokens int
	// PrefixCacheStore is passed to the engine ("" = its default).
	PrefixCacheStore string
	// Settle bounds the wait before each mode for the machine to be quiet
	// (Quiet): 0 does not wait.
	Settle time.Duration
	// Debias adds a "parallel+debiasK" row to W1 and W2: the parallel mode
	// with every decision scored under K option orders (0 or 1 = no row).
	Debias int
	// Rounds is how many times every mode of a workload is measured, the
	// modes interleaved within each round so that a noisy machine slows
	// them alike; rows report the median round and the spread, and ratios
	// are taken between modes of the same round. Defaults to 3.
	Rounds int
	// CascadeSmall is the small model of W4, the cascade (Model is its big
	// one). W4 runs when it is set.
	CascadeSmall string
	// CascadeSmallGPULayers, when set, is GPULayers for the small model
	// only: 0 puts it on the CPU while the big one offloads (the stack's
	// CPU and GPU pools). Defaults to GPULayers.
	CascadeSmallGPULayers *int
	// CascadeBelow escalates W4's decisions whose small-model top
	// probability is below it; 0 chooses the bound that escalates
	// CascadeEscalate of them.
	CascadeBelow float64
	// CascadeEscalate is the share of W4's decisions to escalate when
	// CascadeBelow is 0. Defaults to DefaultCascadeEscalate.
	CascadeEscalate float64
	// CascadeDecisions is the number of W4 decisions (independent states of
	// IndependentTokens). Defaults to 48.
	CascadeDecisions int
	// Log receives progress lines. Defaults to io.Discard.
	Log io.Writer
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.States, 2)
	def(&c.Questions, 21)
	def(&c.StateTokens, Shape777StateTokens)
	def(&c.SuffixTokens, Shape777SuffixTokens)
	def(&c.JevLimit, 12)
	def(&c.Independent, 64)
	def(&c.IndependentTokens, 200)
	def(&c.Rounds, 3)
	def(&c.CascadeDecisions, 48)
	if c.CascadeEscalate <= 0 {
		c.CascadeEscalate = DefaultCascadeEscalate
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{4, 16}
	}
	if len(c.PrefillThreads) == 0 {
		c.PrefillThreads = []int{1, 2}
	}
	if len(c.Workloads) == 0 {
		c.Workloads = []string{"w0", "w1", "w2", "w3"}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Run runs the configured workloads.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{Started: time.Now()}
	want := map[string]bool{}
	for _, w := range cfg.Workloads {
		want[strings.ToLower(w)] = true
	}
	if want["w0"] && cfg.PrefillModel != "" {
		if err := runPrefill(ctx, cfg, rep); err != nil {
			return rep, err
		}
	}
	cascade := (want["w4"] || want["cascade"]) && cfg.CascadeSmall != ""
	if !want["w1"] && !want["w2"] && !want["w3"] && !cascade {
		return rep, nil
	}
	// Engines start cold for every measurement: fresh has no prefix cache,
	// and each cached measurement gets a new engine so that it cannot
	// reuse prefixes another mode left behind.
	newEngine := func(noCache bool) (*llamacpp.Engine, error) {
		return llamacpp.New(llamacpp.Options{ModelPath: cfg.Model, Threads: cfg.Threads, GPULayers: cfg.GPULayers, NoPrefixCache: noCache, FlashAttention: cfg.FlashAttention, BranchBatchTokens: cfg.BranchBatchTokens, PrefixCacheTokens: cfg.PrefixCacheTokens, PrefixCacheStore: cfg.PrefixCacheStore})
	}
	fresh, err := newEngine(true)
	if err != nil {
		return rep, err
	}
	defer fresh.Close()
	threads := cfg.Threads
	if threads == 0 {
		threads = defaultThreads()
	}
	if want["w1"] {
		groups, err := shape777(fresh, cfg)
		if err != nil {
			return rep, err
		}
		if err := runGrouped(ctx, cfg, rep, "W1 shape-777", groups, fresh, newEngine, threads); err != nil {
			return rep, err
		}
	}
	if want["w2"] {
		groups, err := jevbench(cfg.JevBench, cfg.JevLimit)
		if err != nil {
			rep.Notes = append(rep.Notes, "W2 skipped: "+err.Error())
		} else if err := runGrouped(ctx, cfg, rep, "W2 jevbench-240", groups, fresh, newEngine, threads); err != nil {
			return rep, err
		}
	}
	if want["w3"] {
		if err := runIndependent(ctx, cfg, rep, fresh, threads); err != nil {
			return rep, err
		}
	}
	if cascade {
		if err := runCascade(ctx, cfg, rep, fresh, threads); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func defaultThreads() int {
	o := llamacpp.Options{}
	return o.WithDefaults().Threads
}
