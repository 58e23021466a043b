package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/bench"
)

const twoCases = `{"id":"a","state":"The printer is out of toner.","questions":{"team":{"type":"choice","instructions":"Which team?","criteria":{"it":"IT","facilities":"Facilities"}},"urgent":{"type":"noul","instructions":"Is it urgent?"}}}
{"id":"b","state":"I was charged twice.","questions":{"refund":{"type":"noul","instructions":"Does the customer want money back?"}}}`

// TestBuildRoundPrefixesStatesPerRound: each round's states differ, so no
// cache of either server carries over from an earlier round; decisions
// keep state order and prompts are verdict's own.
func TestBuildRoundPrefixesStatesPerRound(t *testing.T) {
	var cases [][]byte
	for _, l := range strings.Split(twoCases, "\n") {
		cases = append(cases, []byte(l))
	}
	r1, err := buildRound(cases, "1", engine.ChatPlain)
	require.NoError(t, err)
	r2, err := buildRound(cases, "2", engine.ChatPlain)
	require.NoError(t, err)
	require.Len(t, r1.systemOne, 2)
	require.Len(t, r1.decisions, 3)
	require.Equal(t, []int{0, 2}, r1.heads)
	var body map[string]any
	require.NoError(t, json.Unmarshal(r1.systemOne[0], &body))
	require.Equal(t, "Round 1. The printer is out of toner.", body["state"])
	require.Equal(t, "default", body["model"])
	require.NotContains(t, body, "id")
	require.Contains(t, r1.prompts[0].Text(), "Round 1. The printer")
	require.Contains(t, r2.prompts[0].Text(), "Round 2. The printer")
	require.Equal(t, r1.prompts[0].Text()[:r1.prompts[0].StateEnd], r1.prompts[1].Text()[:r1.prompts[1].StateEnd], "questions of one state share its head")

	_, err = buildRound([][]byte{[]byte(`{"state": {"a": 1}, "questions": {}}`)}, "1", engine.ChatPlain)
	require.ErrorContains(t, err, "state is not text")
	_, err = buildRound([][]byte{[]byte(`not json`)}, "1", engine.ChatPlain)
	require.ErrorContains(t, err, "case 1")
}

func TestFanOutCallsEveryIndexOnceAndJoinsErrors(t *testing.T) {
	var seen [20]atomic.Int32
	lat, err := bench.FanOut(20, 4, func(i int) error {
		seen[i].Add(1)
		if i == 7 {
			return errors.New("seven")
		}
		return nil
	})
	require.ErrorContains(t, err, "seven")
	require.Len(t, lat, 20)
	for i := range seen {
		require.Equal(t, int32(1), seen[i].Load(), "index %d", i)
	}
}

// TestRatiosPairRounds: the headline ratios compare the best mode of each
// side within the same round, workload by workload.
func TestRatiosPairRounds(t *testing.T) {
	r := &Report{Decisions: 100, States: 10, MinimalTokens: 10000, PeakPrefill: 1000, Independent: 10, IndependentTokens: 5000, Modes: []Mode{
		{Name: "verdict System One", Workload: "shared", Clients: 4, DecisionsPerSec: []float64{10, 5, 12}, TokensEvaluated: []int64{1, 1, 1}, LatencyMs: []float64{1, 2, 3}},
		{Name: "verdict SemIf", Workload: "shared", Clients: 4, DecisionsPerSec: []float64{8, 9, 6}},
		{Name: "llama-server 1 slot", Workload: "shared", Clients: 1, DecisionsPerSec: []float64{5, 4, 6}},
		{Name: "llama-server 4 slots", Workload: "shared", Clients: 4, DecisionsPerSec: []float64{4, 3, 4}},
		{Name: "verdict SemIf", Workload: "independent", Clients: 4, DecisionsPerSec: []float64{1, 1.5, 1}},
		{Name: "llama-server 1 slot", Workload: "independent", Clients: 1, DecisionsPerSec: []float64{1, 1, 2}},
		{Name: "llama-server 4 slots", Workload: "independent", Clients: 4, DecisionsPerSec: []float64{0.5, 0.5, 0.5}},
	}}
	require.Equal(t, 10.0, r.BoundPerSec())
	require.Equal(t, 2.0, r.IndependentBoundPerSec())
	med, lo, hi := r.Ratio(of("shared", true), of("shared", false))
	// Rounds: 10/5 = 2, 9/4 = 2.25, 12/6 = 2 — never the independent rows.
	requireSpread(t, med, lo, hi, 2.0, 2.0, 2.25)
	out := table(r)
	require.Contains(t, out, "token bound 10.00 decisions/s")
	require.Contains(t, out, "shared: verdict's best / llama-server's best: 2.00x [2.00–2.25]")
	// Against N slots only: 10/4, 9/3, 12/4.
	require.Contains(t, out, "N slots under N clients: 3.00x [2.50–3.00]")
	// Independent: 1/1, 1.5/1, 1/2.
	require.Contains(t, out, "independent: verdict / llama-server's best: 1.00x [0.50–1.50]")
	require.Contains(t, out, "3 rounds")

	// With --peer-slots 1 no llama-server mode has several clients: the
	// N-slot ratio is named as absent, not printed as 0.00x.
	var one []Mode
	for _, m := range r.Modes {
		if m.Clients == 1 || strings.HasPrefix(m.Name, "verdict") {
			m.Clients = 1
			one = append(one, m)
		}
	}
	r.Modes = one
	out = table(r)
	require.Contains(t, out, "N slots under N clients: - (no mode with more than one client: --peer-slots 1)")
	require.NotContains(t, out, "N clients: 0.00x")
}

// TestShareComparesTheSameRound: a mode's share of the token bound is
// taken round by round against that round's prefill rate, so a round
// where the whole machine ran slow is not read as the mode's waste; the
// strict share against the fastest round is printed beside it.
func TestShareComparesTheSameRound(t *testing.T) {
	r := &Report{Decisions: 100, States: 10, MinimalTokens: 10000, Independent: 10, IndependentTokens: 5000,
		PrefillPeer: []float64{900, 500, 800}, PrefillVerdict: []float64{1000, 450, 700}, PrefillRounds: []float64{1000, 500, 800},
		PeakPrefill: 1000, PeakPrefillPeer: 900, PeakPrefillVerdict: 1000,
		Modes: []Mode{
			// Bounds per round: 10, 5, 8 decisions/s.
			{Name: "verdict System One", Workload: "shared", Clients: 4, DecisionsPerSec: []float64{10, 5, 4}},
			// Independent bounds per round: 2, 1, 1.6.
			{Name: "verdict SemIf", Workload: "independent", Clients: 4, DecisionsPerSec: []float64{1.8, 0.9, 1.6}},
		}}
	require.Equal(t, 8.0, r.BoundPerSec(), "the median round's rate")
	require.InDelta(t, 1.6, r.IndependentBoundPerSec(), 1e-9)
	med, lo, hi, strict := r.Share(r.Modes[0])
	requireSpread(t, med, lo, hi, 1.0, 0.5, 1.0) // 10/10, 5/5, 4/8
	require.InDelta(t, 0.5, strict, 1e-9, "median dec/s 5 against the fastest round's bound 10")
	med, lo, hi, _ = r.Share(r.Modes[1])
	requireSpread(t, med, lo, hi, 0.9, 0.9, 1.0)
	out := table(r)
	require.Contains(t, out, "fresh prefill per round, the faster system's: 800 [500–1000] tok/s (llama-server 800 [500–900], verdict 700 [450–1000]); fastest round 1000")
	require.Contains(t, out, "token bound 8.00 decisions/s (median round)")
	require.Regexp(t, `verdict System One +4 .* 100% \[50–100\] +50%`, out)

	// A mode without rounds (or a report without rates) has no share.
	med, _, _, _ = (&Report{}).Share(Mode{DecisionsPerSec: []float64{1}})
	require.Zero(t, med)
}

func requireSpread(t *testing.T, med, lo, hi, wantMed, wantLo, wantHi float64) {
	t.Helper()
	require.InDelta(t, wantMed, med, 1e-9, "median")
	require.InDelta(t, wantLo, lo, 1e-9, "min")
	require.InDelta(t, wantHi, hi, 1e-9, "max")
}

func table(r *Report) string {
	var buf bytes.Buffer
	r.WriteTable(&buf)
	return buf.String()
}

// llamaArgs: one context of 8,192 tokens per slot, verdict's threads for
// both of llama-server's thread settings, verdict's GPU layers (-1: all);
// start adds the address by the server's kind.
func TestLlamaArgs(t *testing.T) {
	cfg := Config{Model: "m.gguf", Threads: 2}
	argv := func(slots int) []string { return append(llamaArgs(cfg, slots), llamaServer.listenArgs(8081)...) }
	require.Equal(t, []string{"-m", "m.gguf", "--threads", "2", "--threads-batch", "2", "--gpu-layers", "0", "--parallel", "1", "-c", "8192",
		"--log-disable", "--host", "127.0.0.1", "--port", "8081"}, argv(1))
	require.Equal(t, []string{"-m", "m.gguf", "--threads", "2", "--threads-batch", "2", "--gpu-layers", "0", "--parallel", "4", "-c", "32768",
		"--log-disable", "--host", "127.0.0.1", "--port", "8081"}, argv(4))
	cfg.GPULayers = -1
	require.Contains(t, strings.Join(llamaArgs(cfg, 1), " "), "--gpu-layers all --parallel")
	cfg.GPULayers = 12
	require.Contains(t, strings.Join(llamaArgs(cfg, 1), " "), "--gpu-layers 12 --parallel")
	require.Equal(t, "/health", llamaServer.health())
}

// verdictArgs: llama-server's threads and GPU layers, the concurrent
// modes' clients, the harness's request bound as serve's --timeout, the
// engine flags passed on; start adds the address last.
func TestVerdictArgs(t *testing.T) {
	cfg := Config{Model: "m.gguf", Threads: 2, GPULayers: -1, Slots: 4, Timeout: 10 * time.Minute, VerdictArgs: []string{"--prefix-cache-store", "host"}}
	require.Equal(t, []string{"serve", "--model", "m.gguf", "--threads", "2", "--gpu-layers", "-1", "--log-level", "warn",
		"--max-concurrent", "4", "--timeout", "10m0s", "--prefix-cache-store", "host", "--addr", "127.0.0.1:8080"},
		append(verdictArgs(cfg), verdictServe.listenArgs(8080)...))
	require.Equal(t, "/ping", verdictServe.health())
}

// TestPlanDrivesEachModesServer: the modes of the report in order, each
// with the server, API and clients it is measured with; the second
// llama-server build adds one mode per workload, one slot each.
func TestPlanDrivesEachModesServer(t *testing.T) {
	s := &servers{verdict: &server{}, one: &server{}, many: &server{}}
	cfg := Config{Slots: 3, AltLabel: "no OpenMP"}
	type row struct {
		name, workload string
		clients        int
		srv            *server
		api            api
	}
	want := []row{
		{"verdict System One, a request per state", shared, 3, s.verdict, systemOneAPI},
		{"verdict SemIf, a request per decision", shared, 3, s.verdict, semIfAPI},
		{"llama-server 1 slot, a completion per question", shared, 1, s.one, completionAPI},
		{"llama-server 3 slots, a completion per question", shared, 3, s.many, completionAPI},
		{"verdict SemIf, a request per decision", independent, 3, s.verdict, semIfAPI},
		{"llama-server 1 slot, a completion per decision", independent, 1, s.one, completionAPI},
		{"llama-server 3 slots, a completion per decision", independent, 3, s.many, completionAPI},
	}
	got := func() []row {
		var out []row
		for _, m := range plan(cfg, s) {
			out = append(out, row{m.Name, m.Workload, m.Clients, m.srv, m.api})
		}
		return out
	}
	require.Equal(t, want, got())
	require.Equal(t, []*server{s.verdict, s.one, s.many}, s.list())

	s.alt = &server{}
	want = append(want,
		row{"llama-server (no OpenMP) 1 slot, a completion per question", shared, 1, s.alt, completionAPI},
		row{"llama-server (no OpenMP) 1 slot, a completion per decision", independent, 1, s.alt, completionAPI})
	require.Equal(t, want, got())
	require.Equal(t, []*server{s.verdict, s.one, s.many, s.alt}, s.list())
}

// TestModeSendsItsWorkload: a shared mode sends every decision of its
// round, an independent one each state's first; a round's measurement
// is its decisions over its wall time.
func TestModeSendsItsWorkload(t *testing.T) {
	var cases [][]byte
	for _, l := range strings.Split(twoCases, "\n") {
		cases = append(cases, []byte(l))
	}
	w, err := buildRound(cases, "1.1", engine.ChatPlain)
	require.NoError(t, err)
	m := &mode{Mode: Mode{Workload: shared}, work: w}
	require.Equal(t, []int{0, 1, 2}, m.decisions())
	m.Workload = independent
	require.Equal(t, []int{0, 2}, m.decisions())
	require.Equal(t, cases, m.cases(Config{Cases: nil, IndependentCases: cases}))

	m.record(2, 4*time.Second, 120, []time.Duration{1500 * time.Microsecond, 2 * time.Second})
	require.Equal(t, []float64{0.5}, m.DecisionsPerSec)
	require.Equal(t, []int64{120}, m.TokensEvaluated)
	require.Equal(t, []float64{1.5, 2000}, m.LatencyMs)
}

// withDefaults fills in what is unset and needs cases.
func TestConfigDefaults(t *testing.T) {
	_, err := Config{}.withDefaults()
	require.ErrorContains(t, err, "peer: no cases")
	cfg, err := Config{Cases: [][]byte{[]byte("{}")}}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Rounds)
	require.Equal(t, 4, cfg.Slots)
	require.Equal(t, 10*time.Minute, cfg.Timeout)
	require.NotNil(t, cfg.Log)
	require.Equal(t, cfg.Cases, cfg.IndependentCases)
}

// addPrefill: a round's rate is the faster system's; the peaks are each
// system's fastest round and the faster of those.
func TestAddPrefill(t *testing.T) {
	var r Report
	r.addPrefill(900, 1000)
	r.addPrefill(950, 700)
	require.Equal(t, []float64{900, 950}, r.PrefillPeer)
	require.Equal(t, []float64{1000, 700}, r.PrefillVerdict)
	require.Equal(t, []float64{1000, 950}, r.PrefillRounds)
	require.Equal(t, 950.0, r.PeakPrefillPeer)
	require.Equal(t, 1000.0, r.PeakPrefillVerdict)
	require.Equal(t, 1000.0, r.PeakPrefill)
}

// TestDistinctPrefixesCountsTheTokenTrie: shared prefixes count once,
// wherever they end — a state under its questions, a preamble across
// states — and a prompt that is a prefix of another adds nothing.
func TestDistinctPrefixesCountsTheTokenTrie(t *testing.T) {
	seq := func(s string) []string { return strings.Split(s, " ") }
	for _, c := range []struct {
		name string
		seqs [][]string
		want int64
	}{
		{"none", nil, 0},
		{"one prompt", [][]string{seq("1 2 3")}, 3},
		{"same prompt twice", [][]string{seq("1 2 3"), seq("1 2 3")}, 3},
		{"state then two questions", [][]string{seq("1 2 3 7 8"), seq("1 2 3 7 9")}, 6},
		{"prefix of another", [][]string{seq("1 2 3 4"), seq("1 2")}, 4},
		{"shared preamble only", [][]string{seq("1 2 5 6"), seq("1 2 7 8"), seq("9")}, 7},
		{"same token, other parents", [][]string{seq("1 2"), seq("2 2")}, 4},
	} {
		require.Equal(t, c.want, distinctPrefixes(c.seqs), c.name)
	}
}

// The peer renders prompts in the chat family verdict serve reports, not
// llama-server's (which falls back to chatml for a model without a
// template while verdict renders plain prompts).
func TestServedFamilyIsVerdictsOwn(t *testing.T) {
	f, err := servedFamily(strings.NewReader(`{"models":[{"name":"m","verdict":{"file":"m.gguf","chat_template":"plain"}},{"name":"default","alias_for":"m"}]}`))
	require.NoError(t, err)
	require.Equal(t, engine.ChatPlain, f)
	f, err = servedFamily(strings.NewReader(`{"models":[{"name":"m","verdict":{"chat_template":"chatml"}}]}`))
	require.NoError(t, err)
	require.Equal(t, engine.ChatChatML, f)
	for _, body := range []string{`{"models":[]}`, `{"models":[{"name":"m"}]}`, `{"models":[{"verdict":{}}]}`, `not json`} {
		_, err := servedFamily(strings.NewReader(body))
		require.Error(t, err, body)
		require.Contains(t, err.Error(), "verdict /v1/models", body)
	}
}

// TestParseMetricsReadsUnlabelledSeries: the values of the named series
// in order, help and type lines and other series ignored, a missing or
// malformed one named.
func TestParseMetricsReadsUnlabelledSeries(t *testing.T) {
	body := "# HELP verdict_engine_tokens_evaluated_total Prompt tokens.\n# TYPE verdict_engine_tokens_evaluated_total counter\n" +
		"verdict_engine_tokens_evaluated_total 4786\nverdict_engine_tokens_evaluated_total_extra 1\nverdict_engine_decode_seconds_total 16.25\n"
	got, err := parseMetrics(body, []string{"verdict_engine_decode_seconds_total", "verdict_engine_tokens_evaluated_total"})
	require.NoError(t, err)
	require.Equal(t, []float64{16.25, 4786}, got)
	_, err = parseMetrics(body, []string{"verdict_engine_missing_total"})
	require.ErrorContains(t, err, "has no verdict_engine_missing_total")
	_, err = parseMetrics("verdict_engine_decode_seconds_total x\n", []string{"verdict_engine_decode_seconds_total"})
	require.ErrorContains(t, err, "verdict_engine_decode_seconds_total")
}

// TestEvaluatedReportsAMissingSeries: a /metrics without the counter, or
// no answer at all, is an error naming it, never a crash.
func TestEvaluatedReportsAMissingSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("verdict_engine_decode_seconds_total 1\n"))
	}))
	defer srv.Close()
	c := &client{http: srv.Client()}
	_, err := c.evaluated(context.Background(), srv.URL)
	require.ErrorContains(t, err, "has no verdict_engine_tokens_evaluated_total")
	srv.Close()
	_, err = c.evaluated(context.Background(), srv.URL)
	require.Error(t, err)
}
