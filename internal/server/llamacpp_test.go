//go:build cgo

package server_test

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/server"
)

// realEngine loads the real llama.cpp engine on a tiny synthetic model,
// closed when the test ends.
func realEngine(t *testing.T, opts llamacpp.Options) *llamacpp.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	opts.ModelPath = path
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	if opts.ContextSize == 0 {
		opts.ContextSize = 4096
	}
	e, err := llamacpp.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func realServer(t *testing.T, cfg server.Config) (*llamacpp.Engine, string) {
	t.Helper()
	e := realEngine(t, llamacpp.Options{})
	cfg.Scorer, cfg.Model = e, e.Identity()
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	return e, listen(t, srv)
}

func TestRealEngineConformanceFixtures(t *testing.T) {
	t.Parallel()
	_, url := realServer(t, server.Config{MaxBodyBytes: 16 << 10})
	for name, fx := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			runFixture(t, url, fx)
		})
	}
}

func TestRealEngineSystemOne(t *testing.T) {
	t.Parallel()
	e, url := realServer(t, server.Config{})
	r := do(t, "POST", url+"/v1/systemone", []byte(systemOneAll))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NotEmpty(t, r.header.Get("x-typesafe-request-id"))
	m := numbers(t, r.body)
	require.Equal(t, e.Identity().Name, m["model"], "the model that answered, not the alias asked for")
	answers := m["answers"].(map[string]any)

	p := requireFloat(t, answers["is_billing"].(map[string]any)["noul"])
	require.True(t, p > 0 && p < 1)

	choice := answers["queue"].(map[string]any)
	probs := choice["probabilities"].(map[string]any)
	sum, pmax := 0.0, 0.0
	for _, id := range []string{"billing", "tech", "sales"} {
		f := requireFloat(t, probs[id])
		sum += f
		pmax = math.Max(pmax, f)
	}
	require.InDelta(t, 1, sum, 1e-9)
	require.InDelta(t, math.Min(1, math.Max(0, (3*pmax-1)/2)), requireFloat(t, choice["confidence"]), 1e-12)

	score := answers["urgency"].(map[string]any)
	sp := score["probabilities"].(map[string]any)
	exp := 0.0
	for i, k := range []string{"0", "1", "2"} {
		exp += float64(i) * requireFloat(t, sp[k])
	}
	require.InDelta(t, exp, requireFloat(t, score["score"]), 1e-12)
	extra := score["verdict"].(map[string]any)
	require.Len(t, extra["prompt_sha256"], 64)
	require.NotEmpty(t, extra["prompt_version"])

	usage := m["usage"].(map[string]any)
	in, err := usage["input_tokens"].(json.Number).Int64()
	require.NoError(t, err)
	require.Positive(t, in)

	// Same request, same answer (the engine is deterministic).
	r2 := do(t, "POST", url+"/v1/systemone", []byte(systemOneAll))
	a2 := numbers(t, r2.body)["answers"].(map[string]any)
	require.InDelta(t, p, requireFloat(t, a2["is_billing"].(map[string]any)["noul"]), enginetest.ProbTol(1e-4))
}

func TestRealEngineAWSCLI(t *testing.T) {
	t.Parallel()
	_, url := realServer(t, server.Config{})
	out, log, err := awsInvoke(t, url, `{"decisions":[`+semIfBare+`]}`)
	require.NoError(t, err, log)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	res := got["results"].([]any)[0].(map[string]any)
	require.Equal(t, "support-route", res["id"])
	requireProbabilities(t, res["probabilities"], 3)
	require.NotEmpty(t, res["model"].(map[string]any)["sha256"])
}

// TestRealEngineLoad: many simultaneous clients against a server that
// admits one request at a time. The excess is shed with 503 and
// Retry-After, admitted requests all succeed, and the heap stays flat.
func TestRealEngineLoad(t *testing.T) {
	t.Parallel()
	_, url := realServer(t, server.Config{MaxConcurrent: 1, MaxQueue: server.NoQueue})
	state := strings.Repeat("The customer explains the problem again in more detail. ", 60)
	body := strings.Replace(systemOneAll, "The customer wrote: my card was charged twice for the same order.", state, 1)
	const clients = 48
	round := func() (ok, shed int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		start := make(chan struct{})
		for range clients {
			wg.Go(func() {
				<-start
				r := do(t, "POST", url+"/v1/systemone", []byte(body))
				mu.Lock()
				defer mu.Unlock()
				switch r.status {
				case http.StatusOK:
					ok++
				case server.StatusOverloaded: // System One's overload status
					require.Equal(t, "1", r.header.Get("Retry-After"))
					shed++
				default:
					t.Errorf("unexpected status %d: %s", r.status, r.body)
				}
			})
		}
		close(start)
		wg.Wait()
		return ok, shed
	}
	ok, shed := round()
	t.Logf("first round: %d answered, %d shed", ok, shed)
	require.Equal(t, clients, ok+shed)
	require.Positive(t, ok)
	require.Positive(t, shed, "%d simultaneous clients against one slot", clients)

	before, rssBefore := heapInUse(), rssKiB(t)
	for range 4 {
		round()
	}
	after, rssAfter := heapInUse(), rssKiB(t)
	t.Logf("heap in use: before %d KiB, after 4 more rounds %d KiB; RSS %d → %d KiB", before>>10, after>>10, rssBefore, rssAfter)
	require.Less(t, after, before+32<<20)
	require.Less(t, rssAfter, rssBefore+128<<10, "RSS grew by more than 128 MiB")
}

// rssKiB reads the process's resident set size from /proc.
func rssKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
