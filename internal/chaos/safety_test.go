//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
)

// stateMarker is text that appears only inside the states the log check
// sends; no log line may contain it.
const stateMarker = "ZEBRA-PAPAYA-7731"

// TestNoStateTextInLogs protects callers' data: with debug logging on (and
// --log-state off), nothing `verdict serve` or `verdict up` (front door
// and worker) logs contains state text — not for answered requests, not
// for refused ones (invalid, too large, a prompt over the context) and
// not for results.
func TestNoStateTextInLogs(t *testing.T) {
	state := "The customer " + stateMarker + " was charged twice."
	valid := fmt.Sprintf(`{"decision": {"id": "a", "state": %q, "question": "Is this billing?", "options": [{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]}}`, state)
	oneOption := fmt.Sprintf(`{"decision": {"id": "a", "state": %q, "question": "Is this billing?", "options": [{"id": "yes", "description": "Yes."}]}}`, state)
	long := strings.Repeat(state+" ", 250) // over a 512-token context, under the state limit
	overContext := fmt.Sprintf(`{"decision": {"id": "a", "state": %q, "question": "Is this billing?", "options": [{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]}}`, long)
	overLimit := fmt.Sprintf(`{"decision": {"id": "a", "state": %q, "question": "Is this billing?", "options": [{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]}}`, strings.Repeat(state, 1000))
	systemOne := fmt.Sprintf(`{"model": "jev-latest", "state": {"ticket": %q}, "questions": {"refund": {"type": "noul", "instructions": "Money back?"}}}`, state)
	badType := fmt.Sprintf(`{"model": "jev-latest", "state": {"ticket": %q}, "questions": {"refund": {"type": "tarot"}}}`, state)
	malformed := fmt.Sprintf(`{"decision": {"id": "a", "state": %q, "question": `, state)
	ctx := context.Background()

	t.Run("serve", func(t *testing.T) {
		p, url := startServe(t, "--log-level", "debug", "--ctx", "512", "--max-state-bytes", "16384")
		for _, c := range []struct{ path, body string }{{"/invocations", valid}, {"/invocations", oneOption}, {"/invocations", overContext},
			{"/invocations", overLimit}, {"/v1/systemone", systemOne}, {"/v1/systemone", badType}, {"/invocations", malformed}} {
			status, _, b, err := post(ctx, http.DefaultClient, url+c.path, c.body, nil)
			require.NoError(t, err)
			t.Logf("%s: %d %.120s", c.path, status, b)
		}
		_, err := p.terminate(t, time.Minute)
		require.NoError(t, err)
		require.NotContains(t, p.Output(), stateMarker, "a log line of verdict serve contains state text")

		// The control: with --log-state the same grep finds the state.
		p, url = startServe(t, "--log-level", "debug", "--log-state")
		_, _, _, err = post(ctx, http.DefaultClient, url+"/invocations", valid, nil)
		require.NoError(t, err)
		_, err = p.terminate(t, time.Minute)
		require.NoError(t, err)
		require.Contains(t, p.Output(), stateMarker, "--log-state logs the state")
	})
	t.Run("up", func(t *testing.T) {
		data := t.TempDir()
		p, url := startUp(t, "127.0.0.1:0", data, "--log-level", "debug", "--ctx", "512", "--max-state-bytes", "16384")
		var ids []string
		for _, c := range []struct{ path, body string }{{"/v1/decisions", valid}, {"/v1/decisions", oneOption}, {"/v1/decisions", overContext},
			{"/v1/decisions", overLimit}, {"/v1/systemone/async", systemOne}, {"/v1/systemone/async", badType}, {"/v1/decisions", malformed}} {
			status, hdr, b, err := post(ctx, http.DefaultClient, url+c.path, c.body, nil)
			require.NoError(t, err)
			t.Logf("%s: %d %.120s", c.path, status, b)
			if status == http.StatusAccepted {
				ids = append(ids, hdr.Get("Location"))
			}
		}
		require.NotEmpty(t, ids)
		// The worker has scored (or failed) everything accepted.
		eventually(t, time.Minute, 100*time.Millisecond, func() bool {
			for _, loc := range ids {
				resp, err := http.Get(url + loc)
				if err != nil {
					return false
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.Contains(string(b), `"status":"done"`) {
					return false
				}
			}
			return true
		}, "the accepted requests are done")
		_, err := p.terminate(t, time.Minute)
		require.NoError(t, err)
		require.NotContains(t, p.Output(), stateMarker, "a log line of verdict up contains state text")
	})
}

// TestNonLoopbackWithoutKeysRefused protects against an open listener:
// `verdict serve` and `verdict up` asked to listen beyond loopback without
// API keys refuse to start, with an error that names the flag.
func TestNonLoopbackWithoutKeysRefused(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		for _, args := range [][]string{
			{"serve", "--addr", addr, "--model", tinyModel},
			{"up", "--addr", addr, "--model", tinyModel, "--data", t.TempDir()},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := exec.CommandContext(ctx, verdictBin, args...).CombinedOutput()
			cancel()
			require.Error(t, err, "verdict %s --addr %s without keys must not start:\n%s", args[0], addr, out)
			require.NotErrorIs(t, ctx.Err(), context.DeadlineExceeded, "verdict %s --addr %s kept running", args[0], addr)
			require.Contains(t, string(out), "--addr", "verdict %s: the error names the flag", args[0])
			require.Contains(t, string(out), "--api-keys", "verdict %s: the error says what to set", args[0])
		}
	}
}

// TestWebhookSSRFTargetsRefused protects the network a worker runs in:
// reply URLs that point at loopback (127.0.0.1, [::1], localhost), the
// unspecified address or the cloud metadata address (169.254.169.254) are
// never posted to, the refusal is permanent (the message is not retried
// into the dead-letter queue) and the results still reach the other sinks.
func TestWebhookSSRFTargetsRefused(t *testing.T) {
	var hits atomic.Int64
	hook := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { hits.Add(1) })
	v4 := httptest.NewServer(hook)
	defer v4.Close()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(v4.URL, "http://"))
	require.NoError(t, err)
	targets := []string{v4.URL + "/hook", "http://localhost:" + port + "/hook", "http://0.0.0.0:" + port + "/hook",
		"http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]:" + port + "/hook"}
	if l, err := net.Listen("tcp", "[::1]:0"); err == nil {
		v6 := httptest.NewUnstartedServer(hook)
		v6.Listener.Close()
		v6.Listener = l
		v6.Start()
		defer v6.Close()
		targets = append(targets, v6.URL+"/hook")
	} else {
		targets = append(targets, "http://[::1]:"+port+"/hook")
	}

	// The control: allowed to, the worker does post to the listener.
	control := t.TempDir()
	cq, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(control, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	defer cq.Close()
	m, _ := envelope(t, "ssrf-control", 0, 1, v4.URL+"/hook")
	sendAll(t, context.Background(), cq, []queue.Outgoing{m})
	cw := start(t, nil, "worker", "--queue", "local", "--data", control, "--model", tinyModel, "--threads", "2",
		"--webhook-secret", "chaos-secret", "--webhook-allow-private", "--wait", "1s", "--log-format", "json")
	eventually(t, 2*time.Minute, 100*time.Millisecond, func() bool { return hits.Load() >= 2 }, "the allowed webhook is posted to")
	_, err = cw.terminate(t, time.Minute)
	require.NoError(t, err)
	hits.Store(0)

	data := t.TempDir()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(data, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	defer q.Close()
	want := map[string]bool{}
	var msgs []queue.Outgoing
	for i, target := range targets {
		m, keys := envelope(t, "ssrf", i, 1, target)
		msgs = append(msgs, m)
		want[keys[0]], want[keys[1]] = true, true
	}
	sendAll(t, context.Background(), q, msgs)

	w := start(t, nil, "worker", "--queue", "local", "--data", data, "--model", tinyModel, "--threads", "2",
		"--webhook-secret", "chaos-secret", "--wait", "1s", "--log-format", "json")
	store := filepath.Join(data, "results.db")
	eventually(t, 2*time.Minute, 100*time.Millisecond, func() bool { return len(readStore(t, store)) >= len(want) },
		"the results reach the store")
	eventually(t, time.Minute, 100*time.Millisecond, func() bool {
		st, err := q.Stats(context.Background())
		require.NoError(t, err)
		return st.Visible+st.InFlight == 0
	}, "every message is deleted, none held back for its refused webhook")
	_, err = w.terminate(t, time.Minute)
	require.NoError(t, err)

	require.Zero(t, hits.Load(), "a refused webhook target was posted to")
	got := readStore(t, store)
	for key := range want {
		rec, ok := got[key]
		require.True(t, ok, "decision %s lost", key)
		requireDecided(t, rec)
	}
	require.Zero(t, localDeadLetters(t, filepath.Join(data, "queue.db"), "cpu"), "no message dead-lettered")
	require.Contains(t, w.Output(), "refused", "the refusals are logged")
}
