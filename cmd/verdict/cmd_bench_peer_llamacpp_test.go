//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/bench/peer"
)

// peerSetup gives a peer test the verdict binary, the llama-server the
// Makefile built (VERDICT_LLAMA_SERVER), a tiny synthetic model and where
// to write the report.
func peerSetup(t *testing.T) (bin, server, model, out string) {
	t.Helper()
	server = os.Getenv("VERDICT_LLAMA_SERVER")
	if server == "" {
		t.Skip("VERDICT_LLAMA_SERVER is not set: make test builds llama-server and sets it (make llama-server prints its path)")
	}
	_, err := os.Stat(server)
	require.NoError(t, err, "VERDICT_LLAMA_SERVER")
	bin = buildVerdict(t)
	dir := t.TempDir()
	model = filepath.Join(dir, "tiny.gguf")
	require.NoError(t, exec.Command(bin, "model", "synth", "--shape", "tiny", "-o", model).Run())
	return bin, server, model, filepath.Join(dir, "peer.json")
}

// exampleCases writes n cases in JevBench-240's form (a System One request
// with an id) from the project's own examples/requests: each a distinct
// state of those files (System One's, then SemIf's), asked the questions
// of the System One examples in turn.
func exampleCases(t *testing.T, n int) string {
	t.Helper()
	read := func(pattern string) []map[string]any {
		files, err := filepath.Glob(filepath.Join("..", "..", "examples", "requests", pattern))
		require.NoError(t, err)
		var out []map[string]any
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			out = append(out, m)
		}
		return out
	}
	systemOne := read("systemone-*.json")
	require.NotEmpty(t, systemOne)
	var states []any
	seen := map[string]bool{}
	add := func(s any) {
		if k := fmt.Sprint(s); !seen[k] {
			seen[k] = true
			states = append(states, s)
		}
	}
	for _, c := range systemOne {
		add(c["state"])
	}
	for _, r := range read("semif-*.json") {
		if d, ok := r["decision"].(map[string]any); ok {
			add(d["state"])
		}
		if ds, ok := r["decisions"].([]any); ok {
			for _, d := range ds {
				add(d.(map[string]any)["state"])
			}
		}
	}
	require.GreaterOrEqual(t, len(states), n, "distinct example states")
	var lines []string
	for i := range n {
		c := map[string]any{"id": fmt.Sprintf("example-%d", i), "state": states[i], "questions": systemOne[i%len(systemOne)]["questions"]}
		line, err := json.Marshal(c)
		require.NoError(t, err)
		lines = append(lines, string(line))
	}
	path := filepath.Join(t.TempDir(), "cases.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return path
}

// TestBenchPeerAgainstLlamaServer runs `verdict bench --peer llama-server`
// end to end against the real llama-server of the pinned llama.cpp (the
// Makefile builds it and names it in VERDICT_LLAMA_SERVER) on the tiny
// model: every mode scores every decision and reports the tokens it
// evaluated; the independent workload has its own, larger set of states.
// Speed is not asserted: that is what the benchmark is for.
func TestBenchPeerAgainstLlamaServer(t *testing.T) {
	bin, server, model, out := peerSetup(t)
	cmd := exec.Command(bin, "bench", "--peer", "llama-server", "--llama-server", server, "--model", model,
		"--jevbench", exampleCases(t, 3), "--peer-cases", "2", "--peer-slots", "2",
		"--peer-independent", "3", "--rounds", "2", "--threads", "2", "--out", out, "--settle", "1s",
		"--llama-server-alt", server, "--llama-server-alt-label", "same build") // the second build's modes, with the one at hand

	text, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", text)
	require.Contains(t, string(text), "shared: verdict's best / llama-server's best")
	require.Contains(t, string(text), "independent: verdict / llama-server's best")
	require.Contains(t, string(text), "llama-server (same build) 1 slot")
	var round2 []string
	for _, l := range strings.Split(string(text), "\n") {
		if m, ok := strings.CutPrefix(l, "round 2: "); ok {
			round2 = append(round2, m)
		}
	}
	require.Len(t, round2, 9)
	require.Equal(t, "verdict SemIf, a request per decision", round2[0], "round 2 starts with the second mode")
	require.Equal(t, "verdict System One, a request per state", round2[8], "and ends with the first")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep peer.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Equal(t, 2, rep.States)
	require.Greater(t, rep.Decisions, 2)
	require.Greater(t, rep.PeakPrefill, 0.0)
	require.Greater(t, rep.PeakPrefillPeer, 0.0)
	require.Greater(t, rep.PeakPrefillVerdict, 0.0)
	require.Equal(t, max(rep.PeakPrefillPeer, rep.PeakPrefillVerdict), rep.PeakPrefill, "the peak is the faster system's")
	require.Len(t, rep.PrefillRounds, 2, "a prefill rate every round")
	for k, rate := range rep.PrefillRounds {
		require.Equal(t, max(rep.PrefillPeer[k], rep.PrefillVerdict[k]), rate, "round %d's bound: the faster system's rate", k+1)
		require.Greater(t, rep.PrefillPeer[k], 0.0)
		require.Greater(t, rep.PrefillVerdict[k], 0.0)
	}
	require.Greater(t, rep.MinimalTokens, int64(0))
	require.Equal(t, 3, rep.Independent)
	require.Greater(t, rep.IndependentTokens, int64(0))
	require.Len(t, rep.Modes, 9) // shared: 4 + the second build's; independent: 3 + its
	for _, m := range rep.Modes {
		require.Len(t, m.DecisionsPerSec, 2, m.Name)
		requests := rep.Decisions // one per decision, each round
		switch {
		case m.Workload == "independent":
			requests = rep.Independent // each state's first question
		case strings.Contains(m.Name, "System One"):
			requests = rep.States // one per state
		}
		require.Len(t, m.LatencyMs, 2*requests, m.Name)
		// Minimal tokens are a floor for every system, within 5%: both get
		// the same prompts (verdict's rendering; llama-server's chatml
		// fallback for this template-less model put ~17% more tokens in
		// its prompts), and no exact-prefix cache evaluates fewer than
		// their distinct prefixes. The 5%: each server's cache carries the
		// preamble before "Round r.m." over from the mode before, and
		// verdict tokenizes a prompt's state and question apart.
		floor := rep.MinimalTokens
		if m.Workload == "independent" {
			floor = rep.IndependentTokens
		}
		for _, tok := range m.TokensEvaluated {
			require.GreaterOrEqual(t, float64(tok), 0.95*float64(floor), "%s evaluated fewer tokens than the minimum", m.Name)
		}
	}
}

// The shape-777 workload through the peer benchmark: W1's requests (one
// state of ~1,800 tokens, its questions), both servers told the same GPU
// layers (none here: the CPU).
func TestBenchPeerShape777(t *testing.T) {
	bin, server, model, out := peerSetup(t)
	cmd := exec.Command(bin, "bench", "--peer", "llama-server", "--llama-server", server, "--model", model,
		"--peer-workload", "shape777", "--states", "1", "--questions", "3", "--peer-slots", "2",
		"--rounds", "1", "--threads", "2", "--gpu-layers", "0", "--out", out)
	text, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", text)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep peer.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Equal(t, 1, rep.States)
	require.Equal(t, 3, rep.Decisions)
	require.Equal(t, 1, rep.Independent)
	// The state once (~1,800 tokens) and three suffixes of ~90.
	require.Greater(t, rep.MinimalTokens, int64(1800+3*80))
	require.Less(t, rep.MinimalTokens, int64(2400))
}

func TestBenchPeerFlagErrors(t *testing.T) {
	bin := buildVerdict(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--peer", "vllm"}, "flag --peer"},
		{[]string{"bench", "--peer", "llama-server"}, "flag --llama-server: required"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", "/nonexistent/llama-server"}, "flag --llama-server"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", bin, "--peer-cases", "0"}, "flag --peer-cases"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", bin, "--peer-independent", "-1"}, "flag --peer-independent"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", bin, "--llama-server-alt", "/nonexistent/llama-server"}, "flag --llama-server-alt"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", bin, "--llama-server-alt", bin}, "flag --llama-server-alt-label: required"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", bin, "--peer-workload", "w9"}, "flag --peer-workload"},
		{[]string{"bench", "--peer", "llama-server", "--llama-server", bin, "--peer-workload", "shape777", "--states", "0"}, "flag --states, --questions"},
	} {
		cmd := exec.Command(bin, tc.args...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "VERDICT_LLAMA_SERVER=") { // the flag's variable: the Makefile sets it
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, string(out), tc.want, "%v", tc.args)
	}
}
