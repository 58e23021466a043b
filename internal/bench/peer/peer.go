// Package peer measures verdict against the server users would run
// instead: llama-server of the pinned llama.cpp, on the same GGUF
// with the same threads, each driven through its natural API — verdict
// with one System One request per state and with one SemIf decision per
// request; llama-server with one /completion per question (n_predict 1,
// cache_prompt, the state first in verdict's own prompt), with one slot
// and with N slots under N clients; on every question of each state
// (shared) and on each state's first question alone (independent). Modes
// run interleaved in rounds; each mode of each round prefixes every state
// with "Round r.m." so that no cache carries over between modes or
// rounds.
//
// Run's steps: start the servers (systems.go; server.go runs each child
// process), ask verdict serve which chat wrapper it renders prompts in,
// then every round: prepare it (size the workloads once, measure each
// system's fresh prefill rate, build every mode's states: round.go) and
// run each mode with its server alone (modes.go, through client.go); the
// report prints as a table (table.go).
package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/bench"
)

// Config says what to compare.
type Config struct {
	// Verdict is the verdict binary (`verdict serve` is started from it).
	Verdict string
	// LlamaServer is the llama-server binary of the pinned llama.cpp.
	LlamaServer string
	// AltLlamaServer, when set, is another build of it (AltLabel names
	// how it differs, e.g. "no OpenMP"), compared as a further peer
	// configuration with one slot on both workloads.
	AltLlamaServer, AltLabel string
	// Model is the GGUF both load.
	Model string
	// Threads both use (llama-server: --threads and --threads-batch).
	Threads int
	// GPULayers both offload: verdict's --gpu-layers, llama-server's
	// --gpu-layers (-1 = all, 0 = none: the CPU).
	GPULayers int
	// Cases are System One requests, one per state: JevBench-240 lines or
	// the shape-777 workload (bench.Shape777Requests).
	Cases [][]byte
	// IndependentCases are the states of the independent workload, of
	// which each one's first question is sent; nil means Cases. More of
	// them than Cases narrows the independent ratio's spread at a small
	// cost: those decisions share nothing, so each costs one prefill.
	IndependentCases [][]byte
	// Rounds of interleaved measurements. Defaults to 3.
	Rounds int
	// Slots is llama-server's --parallel for its N-slot mode, and the
	// number of concurrent clients in the concurrent modes. Defaults to 4.
	Slots int
	// Timeout bounds each request. Defaults to 10 minutes.
	Timeout time.Duration
	// Log receives progress and the servers' failures.
	Log io.Writer
	// VerdictArgs are further flags of `verdict serve` (engine settings).
	VerdictArgs []string
	// Settle bounds the wait before each mode for the machine to be quiet
	// (bench.Quiet): 0 does not wait.
	Settle time.Duration
}

// Mode is one system in one way of calling it, over all rounds.
type Mode struct {
	Name string `json:"name"`
	// Workload is "shared" (every question of each state) or
	// "independent" (one question per state: nothing shared).
	Workload string `json:"workload"`
	// Clients is how many requests were in flight at once.
	Clients int `json:"clients"`
	// DecisionsPerSec per round.
	DecisionsPerSec []float64 `json:"decisions_per_s"`
	// TokensEvaluated per round (prompt tokens the model computed).
	TokensEvaluated []int64 `json:"tokens_evaluated"`
	// Latencies of every request of every round, in milliseconds.
	LatencyMs []float64 `json:"latency_ms"`
}

// Report is the whole comparison.
type Report struct {
	Decisions int `json:"decisions"`
	States    int `json:"states"`
	// MinimalTokens is the fewest prompt tokens an engine that reuses exact
	// prefixes evaluates for the shared workload: the distinct prefixes of
	// all its prompts' tokens (each state once, plus what its questions
	// share, plus every question's own tail).
	MinimalTokens int64 `json:"minimal_tokens"`
	// PrefillPeer and PrefillVerdict are each system's fresh prefill rate
	// (tokens/s), once per round: the first question of up to 3 states it
	// has not seen, all their tokens over all their time. llama-server's
	// time is its prompt eval timing (the prompt cache off), verdict's the
	// time inside llama_decode (/metrics). PrefillRounds is the faster of
	// the two in each round: the rate of that round's token bound, so
	// that a mode's share of the bound compares measurements of the same
	// round, as the ratios do, and machine drift between rounds does not
	// enter it.
	PrefillPeer    []float64 `json:"prefill_peer_tokens_per_s"`
	PrefillVerdict []float64 `json:"prefill_verdict_tokens_per_s"`
	PrefillRounds  []float64 `json:"prefill_tokens_per_s"`
	// PeakPrefill is the fastest round's rate: the larger of PeakPrefillPeer
	// and PeakPrefillVerdict, each system's fastest round. A mode's share
	// of the bound at this rate is the strict reading (a slow round
	// against the fastest one).
	PeakPrefill        float64 `json:"peak_prefill_tokens_per_s"`
	PeakPrefillPeer    float64 `json:"peak_prefill_peer_tokens_per_s"`
	PeakPrefillVerdict float64 `json:"peak_prefill_verdict_tokens_per_s"`
	// Independent is the number of decisions of the independent workload
	// (each state's first question) and IndependentTokens their minimum,
	// counted the same way (what the prompts share is their chat preamble).
	Independent       int    `json:"independent_decisions"`
	IndependentTokens int64  `json:"independent_minimal_tokens"`
	Modes             []Mode `json:"modes"`
}

// withDefaults is cfg with its defaults filled in, or an error naming
// what is missing.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if len(cfg.Cases) == 0 {
		return cfg, errors.New("peer: no cases")
	}
	if cfg.IndependentCases == nil {
		cfg.IndependentCases = cfg.Cases
	}
	return cfg, nil
}

// addPrefill records one round's fresh prefill rates, llama-server's and
// verdict's: the round's rate is the faster one, the peaks the fastest
// rounds'.
func (r *Report) addPrefill(peer, verdict float64) {
	r.PrefillPeer = append(r.PrefillPeer, peer)
	r.PrefillVerdict = append(r.PrefillVerdict, verdict)
	r.PrefillRounds = append(r.PrefillRounds, max(peer, verdict))
	r.PeakPrefillPeer = max(r.PeakPrefillPeer, peer)
	r.PeakPrefillVerdict = max(r.PeakPrefillVerdict, verdict)
	r.PeakPrefill = max(r.PeakPrefillPeer, r.PeakPrefillVerdict)
}

// Run starts the servers on 127.0.0.1, measures, stops them.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	srv, err := startServers(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	cmp := &comparison{cfg: cfg, srv: srv, c: &client{http: &http.Client{Timeout: cfg.Timeout}}, rep: &Report{States: len(cfg.Cases)}}
	if err := cmp.askChatFamily(ctx); err != nil {
		return nil, err
	}
	cmp.modes = plan(cfg, srv)
	// Modes run in a rotated order each round, each with its server alone
	// and once the machine is quiet (runMode waits itself, after the
	// other servers are stopped).
	err = bench.Interleave(ctx, cfg.Rounds, len(cmp.modes), 0,
		func(r int) error { return cmp.prepareRound(ctx, r+1) },
		func(r, i int) error { return cmp.runMode(ctx, r+1, cmp.modes[i]) })
	if err != nil {
		return nil, err
	}
	for _, m := range cmp.modes {
		cmp.rep.Modes = append(cmp.rep.Modes, m.Mode)
	}
	return cmp.rep, nil
}

// comparison is one run of Run: the servers, the modes and the report
// they fill.
type comparison struct {
	cfg    Config
	srv    *servers
	c      *client
	family engine.ChatFamily // how verdict serve wraps prompts; llama-server gets the same
	modes  []*mode
	rep    *Report
}

// askChatFamily learns from verdict serve which chat wrapper it renders
// prompts in, so that llama-server's prompts are verdict's own.
func (cmp *comparison) askChatFamily(ctx context.Context) error {
	if err := cmp.srv.only(cmp.srv.verdict); err != nil {
		return err
	}
	family, err := cmp.c.chatFamily(ctx, cmp.srv.verdict.url)
	if err != nil {
		return cmp.srv.verdict.explain(err)
	}
	cmp.family = family
	return cmp.srv.only(cmp.srv.one)
}

// prepareRound readies round r (1-based): in the first round it sizes
// the workloads, in every round it measures both systems' fresh prefill
// rate and gives every mode states of its own ("Round r.m."), so that no
// mode finds an earlier one's states in a cache.
func (cmp *comparison) prepareRound(ctx context.Context, r int) error {
	if err := cmp.srv.only(cmp.srv.one); err != nil {
		return err
	}
	w, err := buildRound(cmp.cfg.Cases, strconv.Itoa(r), cmp.family)
	if err != nil {
		return err
	}
	if r == 1 {
		if err := cmp.sizeWorkloads(ctx, w); err != nil {
			return err
		}
	}
	if err := cmp.measurePrefill(ctx, r, w); err != nil {
		return err
	}
	for i, m := range cmp.modes {
		if m.work, err = buildRound(m.cases(cmp.cfg), fmt.Sprintf("%d.%d", r, i+1), cmp.family); err != nil {
			return err
		}
	}
	return nil
}

// sizeWorkloads counts the decisions of both workloads and their minimal
// tokens (llama-server tokenizes), from w, the first round's shared
// workload.
func (cmp *comparison) sizeWorkloads(ctx context.Context, w *round) error {
	one := cmp.srv.one
	var err error
	cmp.rep.Decisions = len(w.decisions)
	if cmp.rep.MinimalTokens, err = cmp.c.minimalTokens(ctx, one.url, w.texts(w.all())); err != nil {
		return one.explain(err)
	}
	wi, err := buildRound(cmp.cfg.IndependentCases, "1", cmp.family)
	if err != nil {
		return fmt.Errorf("independent %w", err)
	}
	cmp.rep.Independent = len(wi.heads)
	if cmp.rep.IndependentTokens, err = cmp.c.minimalTokens(ctx, one.url, wi.texts(wi.heads)); err != nil {
		return one.explain(err)
	}
	return nil
}

// measurePrefill measures round r's fresh prefill rate of each system,
// alone and once the machine is quiet: llama-server's on w's states,
// verdict's on states of its own ("Round r.0"), fresh to it.
func (cmp *comparison) measurePrefill(ctx context.Context, r int, w *round) error {
	one, vs := cmp.srv.one, cmp.srv.verdict
	bench.Quiet(ctx, cmp.cfg.Settle)
	peer, err := cmp.c.prefillRate(ctx, one.url, w)
	if err != nil {
		return one.explain(err)
	}
	if err := cmp.srv.only(vs); err != nil {
		return err
	}
	bench.Quiet(ctx, cmp.cfg.Settle)
	fresh, err := buildRound(cmp.cfg.Cases, strconv.Itoa(r)+".0", cmp.family)
	if err != nil {
		return err
	}
	verdict, err := cmp.c.verdictPrefillRate(ctx, vs.url, fresh)
	if err != nil {
		return vs.explain(err)
	}
	cmp.rep.addPrefill(peer, verdict)
	return nil
}

// runMode measures m once in round r (1-based): its server alone, the
// machine quiet, decisions/s over the whole of its workload.
func (cmp *comparison) runMode(ctx context.Context, r int, m *mode) error {
	fmt.Fprintf(cmp.cfg.Log, "round %d: %s\n", r, m.Name)
	if err := cmp.srv.only(m.srv); err != nil {
		return err
	}
	bench.Quiet(ctx, cmp.cfg.Settle)
	idx := m.decisions()
	t0 := time.Now()
	tokens, lat, err := m.send(ctx, cmp.c, idx)
	wall := time.Since(t0)
	if err != nil {
		return fmt.Errorf("round %d, %s: %w", r, m.Name, m.srv.explain(err))
	}
	m.record(len(idx), wall, tokens, lat)
	return nil
}
