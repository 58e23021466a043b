//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/bench"
)

func init() {
	register(command{name: "bench", summary: "benchmark the engine: prefill speed and shared-prefix workloads (table + JSON)", runFunc: runBench})
}

// defaultJevBench is where make jevbench puts JevBench-240's cases.
const defaultJevBench = bench.JevBenchDir + "/cases.jsonl"

func runBench(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", "bench [flags]")
	var lf logFlags
	lf.register(fs)
	modelPath := fs.String("model", "", "GGUF for W1–W3 (default: a synthetic 'medium' model under --data)")
	fs.StringVar(modelPath, "m", "", "shorthand for --model")
	prefill := fs.String("prefill-model", "", "GGUF for the W0 prefill table (default: a synthetic 'small' model, the shape of a 0.5 B model)")
	threads := fs.Int("threads", 0, "decode threads for W1–W3 (default: number of CPUs)")
	prefillThreads := fs.String("prefill-threads", "1,2", "comma-separated thread counts for W0")
	states := fs.Int("states", 2, "W1: number of ~1,800-token states (21 questions each)")
	questions := fs.Int("questions", 21, "W1: questions per state")
	jev := fs.String("jevbench", defaultJevBench, "W2 and the peer benchmark: JevBench-240's cases.jsonl, or its folder (make jevbench puts it at the default)")
	limit := fs.Int("limit", 12, "W2: number of JevBench cases")
	indep := fs.Int("independent", 64, "W3: number of independent decisions")
	conc := fs.String("concurrency", "4,16", "W3: comma-separated concurrent-caller counts, a row each (fairness: p95/p50 at each)")
	indepTokens := fs.Int("independent-tokens", 200, "W3: state length in tokens")
	workloads := fs.String("workloads", "w0,w1,w2,w3", "workloads to run (w4 or cascade: a small model first, --model only for the decisions it is unsure of, against --model alone)")
	cascadeSmall := fs.String("cascade-small", "", "W4: the small model of the cascade (default: a synthetic 'tiny' model under --data; --model is the big one)")
	cascadeBelow := fs.Float64("cascade-below", 0, "W4: escalate when the small model's top probability is below this (default: the bound that escalates --cascade-escalate of the decisions)")
	cascadeEscalate := fs.Float64("cascade-escalate", bench.DefaultCascadeEscalate, "W4: share of the decisions to escalate when --cascade-below is not given")
	cascadeN := fs.Int("cascade-decisions", 48, "W4: number of independent decisions (--independent-tokens each)")
	cascadeSmallLayers := fs.String("cascade-small-gpu-layers", "", "W4: --gpu-layers for the small model only, e.g. 0 to run it on the CPU while the big one is on the GPU, as the stack's pools do (default: --gpu-layers)")
	out := fs.String("out", "bench-results.json", "write the report as JSON here (\"\" = don't)")
	data := fs.String("data", ".verdict", "where synthetic models are cached")
	flashAttn := fs.String("flash-attn", "auto", "flash attention: auto, on or off")
	branchTokens := fs.Int("branch-batch", 0, "suffix tokens decoded together in one call (default: the engine's)")
	cacheTokens := fs.Int("prefix-cache-tokens", 0, "tokens the prefix cache may hold (default: the engine's; with --peer, passed to verdict serve)")
	cacheStore := fs.String("prefix-cache-store", "auto", "where the prefix cache keeps states between uses: auto, kv or host (the engine's --prefix-cache-store; with --peer, passed to verdict serve)")
	gpuLayers := fs.Int("gpu-layers", -1, "layers to offload to a GPU: -1 = all when a GPU backend and device are present, 0 = CPU only")
	quant := fs.String("quant", "", "also run W0 and W1 on the models quantized to these types, comma-separated ("+strings.Join(llamacpp.QuantTypeNames(), ",")+"; cached under --data/models)")
	peerName := fs.String("peer", "", "compare with a peer server instead of running the workloads: llama-server (make bench-peer)")
	llamaServer := fs.String("llama-server", "", "with --peer llama-server: its binary, built from the pinned llama.cpp (make llama-server)")
	altServer := fs.String("llama-server-alt", "", "with --peer llama-server: another llama-server build (e.g. make llama-server OPENMP=off), compared with one slot as a further peer configuration")
	altLabel := fs.String("llama-server-alt-label", "", "with --llama-server-alt: how that build differs (e.g. \"no OpenMP\")")
	peerCases := fs.Int("peer-cases", 24, "with --peer: JevBench-240 cases to send (one state each)")
	peerIndependent := fs.Int("peer-independent", 0, "with --peer: states of the independent workload, each one's first question alone (0: as many as the shared workload has)")
	peerWorkload := fs.String("peer-workload", "jevbench", "with --peer: jevbench (--peer-cases JevBench-240 states) or shape777 (W1's workload: --states states of ~1,800 tokens, --questions questions each)")
	peerSlots := fs.Int("peer-slots", 4, "with --peer: llama-server's --parallel for its N-slot mode, and the concurrent clients of the concurrent modes")
	rounds := fs.Int("rounds", 3, "measure every mode this many times, modes interleaved within each round (each round starting one mode later); rows report the median and [min–max]")
	settle := fs.Duration("settle", 5*time.Second, "before each mode, wait up to this long for the CPUs to be quiet (90% idle over 200 ms), so that threads still spinning after the last mode do not slow the next (0 = no wait)")
	debias := fs.Int("debias", 4, "W1, W2: add a row scoring every decision under this many option orders (0 = no row)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := lf.setup(); err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("flag --rounds: must be >= 1, got %d", *rounds)
	}
	if *settle < 0 {
		return fmt.Errorf("flag --settle: must be >= 0, got %v", *settle)
	}
	if *cascadeBelow < 0 || *cascadeBelow > 1 {
		return fmt.Errorf("flag --cascade-below: must be in (0, 1], got %v", *cascadeBelow)
	}
	if !(*cascadeEscalate > 0 && *cascadeEscalate <= 1) {
		return fmt.Errorf("flag --cascade-escalate: must be in (0, 1], got %v", *cascadeEscalate)
	}
	if *cascadeN < 1 {
		return fmt.Errorf("flag --cascade-decisions: must be >= 1, got %d", *cascadeN)
	}
	var quants []string
	for _, q := range strings.Split(*quant, ",") {
		if q = strings.TrimSpace(q); q != "" {
			if _, ok := llamacpp.QuantTypes[q]; !ok {
				return fmt.Errorf("flag --quant: unknown type %q (known: %s)", q, strings.Join(llamacpp.QuantTypeNames(), ", "))
			}
			quants = append(quants, q)
		}
	}
	if *peerName != "" {
		return runPeer(ctx, peerFlags{name: *peerName, llamaServer: *llamaServer, altServer: *altServer, altLabel: *altLabel, cases: *peerCases, independent: *peerIndependent, slots: *peerSlots,
			workload: *peerWorkload, states: *states, questions: *questions, gpuLayers: gpuLayersFor(*gpuLayers, llamacpp.Info().Devices), model: *modelPath, data: *data, jevbench: *jev, threads: *threads, rounds: *rounds, out: *out, cacheTokens: *cacheTokens, cacheStore: *cacheStore, settle: *settle})
	}
	cfg := bench.Config{Model: *modelPath, PrefillModel: *prefill, Threads: *threads, States: *states, Questions: *questions,
		JevBench: *jev, JevLimit: *limit, Independent: *indep, IndependentTokens: *indepTokens, FlashAttention: *flashAttn, BranchBatchTokens: *branchTokens, PrefixCacheTokens: *cacheTokens, PrefixCacheStore: *cacheStore, Settle: *settle, Debias: *debias, Rounds: *rounds, GPULayers: gpuLayersFor(*gpuLayers, llamacpp.Info().Devices), Log: os.Stderr}
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.TrimSpace(w); w != "" {
			cfg.Workloads = append(cfg.Workloads, w)
		}
	}
	for _, s := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("flag --concurrency: bad value %q (want e.g. 4,16)", *conc)
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	for _, s := range strings.Split(*prefillThreads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("flag --prefill-threads: bad value %q (want e.g. 1,2)", *prefillThreads)
		}
		cfg.PrefillThreads = append(cfg.PrefillThreads, n)
	}
	cfg.CascadeSmall, cfg.CascadeBelow, cfg.CascadeEscalate, cfg.CascadeDecisions = *cascadeSmall, *cascadeBelow, *cascadeEscalate, *cascadeN
	if *cascadeSmallLayers != "" {
		n, err := strconv.Atoi(*cascadeSmallLayers)
		if err != nil || n < -1 {
			return fmt.Errorf("flag --cascade-small-gpu-layers: want -1 (all), 0 (CPU) or a layer count, got %q", *cascadeSmallLayers)
		}
		n = gpuLayersFor(n, llamacpp.Info().Devices)
		cfg.CascadeSmallGPULayers = &n
	}
	var err error
	if cfg.CascadeSmall == "" && (strings.Contains(*workloads, "w4") || strings.Contains(*workloads, "cascade")) {
		if cfg.CascadeSmall, err = synthModel(*data, "tiny"); err != nil {
			return err
		}
	}
	if cfg.Model == "" {
		if cfg.Model, err = synthModel(*data, "medium"); err != nil {
			return err
		}
	}
	if cfg.PrefillModel == "" && strings.Contains(*workloads, "w0") {
		if cfg.PrefillModel, err = synthModel(*data, "small"); err != nil {
			return err
		}
	}
	rep, err := bench.Run(ctx, cfg)
	for _, q := range quants {
		if err != nil {
			break
		}
		qcfg := cfg
		qcfg.Workloads = nil
		for _, w := range cfg.Workloads {
			if w == "w0" || w == "w1" {
				qcfg.Workloads = append(qcfg.Workloads, w)
			}
		}
		if qcfg.Model, err = quantizedCopy(cfg.Model, q, *data); err != nil {
			break
		}
		if qcfg.PrefillModel != "" {
			if qcfg.PrefillModel, err = quantizedCopy(cfg.PrefillModel, q, *data); err != nil {
				break
			}
		}
		var qrep *bench.Report
		qrep, err = bench.Run(ctx, qcfg)
		if qrep != nil {
			for _, row := range qrep.Rows {
				row.Workload += " " + q
				rep.Rows = append(rep.Rows, row)
			}
		}
	}
	if rep != nil {
		rep.WriteTable(os.Stdout)
		if *out != "" {
			b, jerr := json.MarshalIndent(rep, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(*out, b, 0o644)
			}
			if jerr != nil {
				return fmt.Errorf("flag --out: %w", jerr)
			}
			fmt.Fprintf(os.Stderr, "report written to %s\n", *out)
		}
	}
	return engineFlagError(err)
}
