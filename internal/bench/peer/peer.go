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
package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/bench"
	"github.com/verdict-dev/verdict/internal/hugepages"
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

	srv *server // the server the mode drives
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

// Run starts both servers on 127.0.0.1, measures, stops them.
func Run(ctx context.Context, cfg Config) (*Report, error) {
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
		return nil, errors.New("peer: no cases")
	}
	if cfg.IndependentCases == nil {
		cfg.IndependentCases = cfg.Cases
	}
	vs, err := start(ctx, cfg, "verdict serve", cfg.Verdict, "/ping", verdictArgs(cfg)...)
	if err != nil {
		return nil, err
	}
	defer vs.stop()
	one, err := start(ctx, cfg, "llama-server --parallel 1", cfg.LlamaServer, "/health",
		llamaArgs(cfg, 1)...)
	if err != nil {
		return nil, err
	}
	defer one.stop()
	many, err := start(ctx, cfg, fmt.Sprintf("llama-server --parallel %d", cfg.Slots), cfg.LlamaServer, "/health",
		llamaArgs(cfg, cfg.Slots)...)
	if err != nil {
		return nil, err
	}
	defer many.stop()
	var alt *server
	if cfg.AltLlamaServer != "" {
		if alt, err = start(ctx, cfg, "llama-server ("+cfg.AltLabel+") --parallel 1", cfg.AltLlamaServer, "/health",
			llamaArgs(cfg, 1)...); err != nil {
			return nil, err
		}
		defer alt.stop()
	}

	// Each system is measured alone: the servers not under test are
	// stopped (SIGSTOP), so that an idle one's threads (llama-server's
	// OpenMP threads spin for seconds after a request; its slot loop
	// wakes up every so often) take nothing from the one measured.
	servers := []*server{vs, one, many}
	if alt != nil {
		servers = append(servers, alt)
	}
	only := func(target *server) error {
		for _, s := range servers {
			if s != target {
				if err := s.pause(); err != nil {
					return fmt.Errorf("%s: pause: %w", s.name, err)
				}
			}
		}
		if err := target.resume(); err != nil {
			return fmt.Errorf("%s: resume: %w", target.name, err)
		}
		return nil
	}
	c := &client{http: &http.Client{Timeout: cfg.Timeout}}
	if err := only(vs); err != nil {
		return nil, err
	}
	family, err := c.chatFamily(ctx, vs.url)
	if err != nil {
		return nil, err
	}
	if err := only(one); err != nil {
		return nil, err
	}
	rep := &Report{States: len(cfg.Cases)}
	modes := []*Mode{
		{Name: "verdict System One, a request per state", Workload: "shared", Clients: cfg.Slots, srv: vs},
		{Name: "verdict SemIf, a request per decision", Workload: "shared", Clients: cfg.Slots, srv: vs},
		{Name: "llama-server 1 slot, a completion per question", Workload: "shared", Clients: 1, srv: one},
		{Name: fmt.Sprintf("llama-server %d slots, a completion per question", cfg.Slots), Workload: "shared", Clients: cfg.Slots, srv: many},
		{Name: "verdict SemIf, a request per decision", Workload: "independent", Clients: cfg.Slots, srv: vs},
		{Name: "llama-server 1 slot, a completion per decision", Workload: "independent", Clients: 1, srv: one},
		{Name: fmt.Sprintf("llama-server %d slots, a completion per decision", cfg.Slots), Workload: "independent", Clients: cfg.Slots, srv: many},
	}
	if alt != nil {
		modes = append(modes,
			&Mode{Name: "llama-server (" + cfg.AltLabel + ") 1 slot, a completion per question", Workload: "shared", Clients: 1, srv: alt},
			&Mode{Name: "llama-server (" + cfg.AltLabel + ") 1 slot, a completion per decision", Workload: "independent", Clients: 1, srv: alt})
	}
	// Each round's workloads and closures; every mode of every round gets
	// its own states ("Round r.m."), so that no mode finds the states of
	// an earlier one in a cache.
	var w *round
	var runs []func() (int64, []time.Duration, error)
	var ws []*round
	begin := func(r0 int) error {
		r := r0 + 1
		if err := only(one); err != nil {
			return err
		}
		var err error
		if w, err = buildRound(cfg.Cases, strconv.Itoa(r), family); err != nil {
			return err
		}
		if r == 1 {
			rep.Decisions = len(w.decisions)
			if rep.MinimalTokens, err = c.minimalTokens(ctx, one.url, w.texts(w.all())); err != nil {
				return err
			}
			wi, err := buildRound(cfg.IndependentCases, strconv.Itoa(r), family)
			if err != nil {
				return fmt.Errorf("independent %w", err)
			}
			rep.Independent = len(wi.heads)
			if rep.IndependentTokens, err = c.minimalTokens(ctx, one.url, wi.texts(wi.heads)); err != nil {
				return err
			}
		}
		bench.Quiet(ctx, cfg.Settle)
		peak, err := c.prefillRate(ctx, one.url, w)
		if err != nil {
			return err
		}
		rep.PrefillPeer = append(rep.PrefillPeer, peak)
		rep.PeakPrefillPeer = max(rep.PeakPrefillPeer, peak)
		if err := only(vs); err != nil {
			return err
		}
		bench.Quiet(ctx, cfg.Settle)
		pw, err := buildRound(cfg.Cases, strconv.Itoa(r)+".0", family) // states of its own: fresh
		if err != nil {
			return err
		}
		if peak, err = c.verdictPrefillRate(ctx, vs.url, pw); err != nil {
			return err
		}
		rep.PrefillVerdict = append(rep.PrefillVerdict, peak)
		rep.PrefillRounds = append(rep.PrefillRounds, max(rep.PrefillPeer[len(rep.PrefillPeer)-1], peak))
		rep.PeakPrefillVerdict = max(rep.PeakPrefillVerdict, peak)
		rep.PeakPrefill = max(rep.PeakPrefillPeer, rep.PeakPrefillVerdict)
		ws = make([]*round, len(modes))
		for i, m := range modes {
			cases := cfg.Cases
			if m.Workload == "independent" {
				cases = cfg.IndependentCases
			}
			if ws[i], err = buildRound(cases, fmt.Sprintf("%d.%d", r, i+1), family); err != nil {
				return err
			}
		}
		all := w.all()
		runs = []func() (int64, []time.Duration, error){
			func() (int64, []time.Duration, error) { return c.verdictSystemOne(ctx, vs.url, ws[0], cfg.Slots) },
			func() (int64, []time.Duration, error) { return c.verdictSemIf(ctx, vs.url, ws[1], all, cfg.Slots) },
			func() (int64, []time.Duration, error) { return c.completions(ctx, one.url, ws[2], all, 1) },
			func() (int64, []time.Duration, error) { return c.completions(ctx, many.url, ws[3], all, cfg.Slots) },
			func() (int64, []time.Duration, error) {
				return c.verdictSemIf(ctx, vs.url, ws[4], ws[4].heads, cfg.Slots)
			},
			func() (int64, []time.Duration, error) { return c.completions(ctx, one.url, ws[5], ws[5].heads, 1) },
			func() (int64, []time.Duration, error) {
				return c.completions(ctx, many.url, ws[6], ws[6].heads, cfg.Slots)
			},
		}
		if alt != nil {
			runs = append(runs,
				func() (int64, []time.Duration, error) { return c.completions(ctx, alt.url, ws[7], all, 1) },
				func() (int64, []time.Duration, error) { return c.completions(ctx, alt.url, ws[8], ws[8].heads, 1) })
		}
		return nil
	}
	// Modes run in a rotated order each round, each with its server alone
	// and once the machine is quiet.
	err = bench.Interleave(ctx, cfg.Rounds, len(modes), 0, begin, func(r0, i int) error {
		fmt.Fprintf(cfg.Log, "round %d: %s\n", r0+1, modes[i].Name)
		if err := only(modes[i].srv); err != nil {
			return err
		}
		bench.Quiet(ctx, cfg.Settle)
		t0 := time.Now()
		tokens, lat, err := runs[i]()
		if err != nil {
			return fmt.Errorf("round %d, %s: %w", r0+1, modes[i].Name, err)
		}
		n := len(w.decisions)
		if modes[i].Workload == "independent" {
			n = len(ws[i].heads)
		}
		modes[i].DecisionsPerSec = append(modes[i].DecisionsPerSec, float64(n)/time.Since(t0).Seconds())
		modes[i].TokensEvaluated = append(modes[i].TokensEvaluated, tokens)
		for _, l := range lat {
			modes[i].LatencyMs = append(modes[i].LatencyMs, float64(l.Microseconds())/1000)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, m := range modes {
		rep.Modes = append(rep.Modes, *m)
	}
	return rep, nil
}

// round is one mode's workload in one round: the cases with their states
// prefixed by a tag of both, as System One bodies, decisions and
// verdict's prompts.
type round struct {
	systemOne [][]byte            // one body per state
	decisions []decision.Decision // every question, state by state
	prompts   []engine.Prompt     // decisions' prompts, as verdict renders them
	heads     []int               // index of each state's first decision
}

// all is the index of every decision.
func (w *round) all() []int {
	all := make([]int, len(w.decisions))
	for i := range all {
		all[i] = i
	}
	return all
}

// texts is the prompt text of the decisions at idx.
func (w *round) texts(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = w.prompts[i].Text()
	}
	return out
}

func buildRound(cases [][]byte, tag string, family engine.ChatFamily) (*round, error) {
	w := &round{}
	for i, line := range cases {
		var c map[string]any
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("case %d: %w", i+1, err)
		}
		st, ok := c["state"].(string)
		if !ok {
			return nil, fmt.Errorf("case %d: state is not text", i+1)
		}
		c["state"] = fmt.Sprintf("Round %s. %s", tag, st)
		c["model"] = "default" // an alias every verdict serve accepts
		delete(c, "id")
		body, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		req, err := decision.ParseSystemOne(body, decision.Limits{})
		if err != nil {
			return nil, fmt.Errorf("case %d: %w", i+1, err)
		}
		w.systemOne = append(w.systemOne, body)
		w.heads = append(w.heads, len(w.decisions))
		for _, d := range req.Decisions() {
			w.decisions = append(w.decisions, d)
			w.prompts = append(w.prompts, engine.Render(&d, family))
		}
	}
	return w, nil
}

// verdictArgs are `verdict serve`'s flags, the address left for start:
// the same threads and GPU layers as llama-server, as many requests at
// once as the concurrent modes send, and the harness's own per-request
// bound as serve's --timeout (serve's default minute is shorter than a
// shape-777 state's 21 questions take on two slow cores; llama-server has
// no limit of its own).
func verdictArgs(cfg Config) []string {
	args := []string{"serve", "--model", cfg.Model, "--threads", strconv.Itoa(cfg.Threads), "--gpu-layers", strconv.Itoa(cfg.GPULayers),
		"--log-level", "warn", "--max-concurrent", strconv.Itoa(cfg.Slots), "--timeout", cfg.Timeout.String()}
	return append(append(args, cfg.VerdictArgs...), "--addr")
}

// llamaArgs are llama-server's flags for slots parallel slots of 8,192
// tokens each, with verdict's model, threads and GPU layers, on 127.0.0.1
// (start appends the port).
func llamaArgs(cfg Config, slots int) []string {
	th := strconv.Itoa(cfg.Threads)
	ngl := strconv.Itoa(cfg.GPULayers)
	if cfg.GPULayers < 0 {
		ngl = "all"
	}
	return []string{"-m", cfg.Model, "--threads", th, "--threads-batch", th, "--gpu-layers", ngl, "--parallel", strconv.Itoa(slots),
		"-c", strconv.Itoa(8192 * slots), "--log-disable", "--host", "127.0.0.1", "--port"}
}

type client struct{ http *http.Client }

func (c *client) post(ctx context.Context, url string, body any, out any) error {
	var buf []byte
	switch b := body.(type) {
	case []byte:
		buf = b
	default:
		var err error
		if buf, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %.300s", url, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// chatFamily asks verdict serve which chat wrapper it renders prompts in
// (its /v1/models card: verdict.chat_template), so that llama-server's
// completions carry exactly verdict's prompt. llama-server's own template
// is no guide: for a model without one it reports its chatml fallback,
// while verdict renders plain prompts, and then llama-server would
// evaluate ~14 tokens more per decision than verdict.
func (c *client) chatFamily(ctx context.Context, verdictBase string) (engine.ChatFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, verdictBase+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return servedFamily(resp.Body)
}

// servedFamily reads the chat family from a verdict /v1/models body: the
// card that answers is the first one.
func servedFamily(r io.Reader) (engine.ChatFamily, error) {
	var models struct {
		Models []struct {
			Verdict *struct {
				ChatTemplate string `json:"chat_template"`
			} `json:"verdict"`
		} `json:"models"`
	}
	if err := json.NewDecoder(r).Decode(&models); err != nil {
		return "", fmt.Errorf("verdict /v1/models: %w", err)
	}
	if len(models.Models) == 0 || models.Models[0].Verdict == nil || models.Models[0].Verdict.ChatTemplate == "" {
		return "", errors.New("verdict /v1/models: the first model card has no verdict.chat_template")
	}
	return engine.ChatFamily(models.Models[0].Verdict.ChatTemplate), nil
}

// tokenIDs is text's tokens as llama-server's /tokenize gives them, each
// kept as its JSON text (ids are compared, never interpreted).
func (c *client) tokenIDs(ctx context.Context, base, text string) ([]string, error) {
	var out struct {
		Tokens []json.RawMessage `json:"tokens"`
	}
	if err := c.post(ctx, base+"/tokenize", map[string]any{"content": text, "add_special": true, "parse_special": true}, &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Tokens))
	for i, t := range out.Tokens {
		ids[i] = string(t)
	}
	return ids, nil
}

// minimalTokens is the fewest tokens any engine that reuses exact prompt
// prefixes must evaluate for texts: the distinct prefixes of their
// tokenizations (the nodes of their token trie). Each state counts once,
// and so does whatever else prompts share: the chat template's preamble
// across states, the question framing across one state's questions.
func (c *client) minimalTokens(ctx context.Context, base string, texts []string) (int64, error) {
	seqs := make([][]string, len(texts))
	for i, t := range texts {
		var err error
		if seqs[i], err = c.tokenIDs(ctx, base, t); err != nil {
			return 0, err
		}
	}
	return distinctPrefixes(seqs), nil
}

// distinctPrefixes counts the nonempty distinct prefixes of seqs.
func distinctPrefixes(seqs [][]string) int64 {
	type edge struct {
		from int
		tok  string
	}
	trie := map[edge]int{}
	for _, s := range seqs {
		node := 0
		for _, t := range s {
			next, ok := trie[edge{node, t}]
			if !ok {
				next = len(trie) + 1
				trie[edge{node, t}] = next
			}
			node = next
		}
	}
	return int64(len(trie))
}

type completion struct {
	Timings struct {
		PromptN  int     `json:"prompt_n"`
		PromptMs float64 `json:"prompt_ms"`
	} `json:"timings"`
}

// prefillRate is llama-server's fresh prefill rate over the round's
// first prompts of up to 3 states (prompt cache off): their tokens over
// their prompt time, so that the mix of lengths counts as the workload
// has it, not the fastest (shortest) prompt alone.
func (c *client) prefillRate(ctx context.Context, base string, w *round) (float64, error) {
	var tokens, ms float64
	for _, h := range w.heads[:min(len(w.heads), 3)] {
		var out completion
		if err := c.post(ctx, base+"/completion", map[string]any{"prompt": w.prompts[h].Text(), "n_predict": 1, "cache_prompt": false}, &out); err != nil {
			return 0, err
		}
		tokens += float64(out.Timings.PromptN)
		ms += out.Timings.PromptMs
	}
	if ms <= 0 {
		return 0, errors.New("llama-server reported no prompt time")
	}
	return tokens / ms * 1000, nil
}

// completions sends one /completion per decision of idx from clients at
// once, in order.
func (c *client) completions(ctx context.Context, base string, w *round, idx []int, clients int) (int64, []time.Duration, error) {
	var tokens int64
	var mu sync.Mutex
	lat, err := bench.FanOut(len(idx), clients, func(k int) error {
		i := idx[k]
		var out completion
		err := c.post(ctx, base+"/completion", map[string]any{
			"prompt": w.prompts[i].Text(), "n_predict": 1, "cache_prompt": true, "n_probs": len(w.decisions[i].Options),
		}, &out)
		mu.Lock()
		tokens += int64(out.Timings.PromptN)
		mu.Unlock()
		return err
	})
	return tokens, lat, err
}

// verdictSystemOne sends one System One request per state.
func (c *client) verdictSystemOne(ctx context.Context, base string, w *round, clients int) (int64, []time.Duration, error) {
	before, err := c.evaluated(ctx, base)
	if err != nil {
		return 0, nil, err
	}
	lat, err := bench.FanOut(len(w.systemOne), clients, func(i int) error {
		return c.post(ctx, base+"/v1/systemone", w.systemOne[i], nil)
	})
	after, merr := c.evaluated(ctx, base)
	return after - before, lat, errors.Join(err, merr)
}

// verdictSemIf sends one SemIf decision per request, those of idx in
// order.
func (c *client) verdictSemIf(ctx context.Context, base string, w *round, idx []int, clients int) (int64, []time.Duration, error) {
	before, err := c.evaluated(ctx, base)
	if err != nil {
		return 0, nil, err
	}
	lat, err := bench.FanOut(len(idx), clients, func(k int) error {
		return c.post(ctx, base+"/invocations", map[string]any{"decision": w.decisions[idx[k]]}, nil)
	})
	after, merr := c.evaluated(ctx, base)
	return after - before, lat, errors.Join(err, merr)
}

// evaluated reads verdict's count of prompt tokens evaluated from /metrics.
func (c *client) evaluated(ctx context.Context, base string) (int64, error) {
	m, err := c.metrics(ctx, base, "verdict_engine_tokens_evaluated_total")
	if err != nil {
		return 0, err
	}
	return int64(m[0]), nil
}

// verdictPrefillRate is verdict's fresh prefill rate over the first
// question of up to 3 states of w, one at a time: tokens evaluated over
// seconds inside llama_decode, as llama-server's prompt timing counts
// them, all the states' together (as prefillRate).
func (c *client) verdictPrefillRate(ctx context.Context, base string, w *round) (float64, error) {
	names := []string{"verdict_engine_tokens_evaluated_total", "verdict_engine_decode_seconds_total"}
	before, err := c.metrics(ctx, base, names...)
	if err != nil {
		return 0, err
	}
	for _, h := range w.heads[:min(len(w.heads), 3)] {
		if err := c.post(ctx, base+"/invocations", map[string]any{"decision": w.decisions[h]}, nil); err != nil {
			return 0, err
		}
	}
	after, err := c.metrics(ctx, base, names...)
	if err != nil {
		return 0, err
	}
	s := after[1] - before[1]
	if s <= 0 {
		return 0, errors.New("verdict's /metrics counted no decode time")
	}
	return (after[0] - before[0]) / s, nil
}

// metrics reads the values of unlabelled series from verdict's /metrics,
// in the order named.
func (c *client) metrics(ctx context.Context, base string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(b), names)
}

// parseMetrics finds each named series' value in a Prometheus text body.
func parseMetrics(body string, names []string) ([]float64, error) {
	out := make([]float64, len(names))
	found := make([]bool, len(names))
	for _, line := range strings.Split(body, "\n") {
		for i, n := range names {
			if v, ok := strings.CutPrefix(line, n+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return nil, fmt.Errorf("verdict /metrics: %s: %w", n, err)
				}
				out[i], found[i] = f, true
			}
		}
	}
	for i, n := range names {
		if !found[i] {
			return nil, fmt.Errorf("verdict /metrics has no %s", n)
		}
	}
	return out, nil
}

// server is a started child process.
type server struct {
	name string
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
	done chan struct{} // closed when the process has exited
}

// syncBuffer is a bytes.Buffer the child's output goroutines and the
// caller may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start runs bin with args plus a free port (or 127.0.0.1:port for
// verdict's --addr) and waits until health answers 200.
func start(ctx context.Context, cfg Config, name, bin, health string, args ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	last := strconv.Itoa(port)
	if args[len(args)-1] == "--addr" {
		last = "127.0.0.1:" + last
	}
	s := &server{name: name, logs: &syncBuffer{}, url: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	s.cmd = exec.Command(bin, append(args, last)...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	// Every server starts from the environment this run was started with:
	// llama-server runs as its users run it, without the malloc tunable
	// verdict added to its own (verdict serve adds it again itself).
	s.cmd.Env = hugepages.Original(os.Environ())
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+health, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(cfg.Log, "%s ready at %s\n", name, s.url)
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before it was ready: %.2000s", name, s.logs.String())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.stop()
	return nil, fmt.Errorf("%s did not become ready: %.2000s", name, s.logs.String())
}

func (s *server) stop() {
	_ = s.resume() // a stopped process would not handle the interrupt
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
