//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
)

// Sizes of the shutdown checks.
const (
	drainDeadline   = 3 * time.Second // --drain-timeout and --shutdown-timeout
	drainClients    = 8               // clients busy when serve gets SIGTERM
	drainRequests   = 60              // requests queued in up when it gets SIGTERM
	longMessages    = 24              // messages of long decodes queued in the worker
	longStateReps   = 120             // sentences per state: a few thousand tokens each
	longDecodeShape = "medium"        // a model slow enough to be caught mid-decode
	// longDecodeBatch tokens per decode call: one call stays well inside
	// shutdownMargin, so the check asks for "within one decode call".
	longDecodeBatch = 512
)

// TestSIGTERMDrainsServeInDeadline protects `verdict serve`'s graceful
// stop: SIGTERM while clients keep it busy exits 0 within --drain-timeout
// (plus a small margin), having answered the requests it had taken.
func TestSIGTERMDrainsServeInDeadline(t *testing.T) {
	p, url := startServe(t, "--drain-timeout", drainDeadline.String())
	body := semifBatch("drain", 1, 40)
	var ok atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range drainClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: time.Minute}
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, _, _, err := post(context.Background(), c, url+"/invocations", body, nil)
				if err != nil {
					return // the server is gone
				}
				if status == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	eventually(t, time.Minute, 20*time.Millisecond, func() bool { return ok.Load() >= drainClients }, "clients are answered")
	took, err := p.terminate(t, drainDeadline+time.Minute)
	close(stop)
	wg.Wait()
	require.NoError(t, err, "exit status 0 after SIGTERM")
	require.LessOrEqual(t, took, drainDeadline+shutdownMargin, "verdict serve exits within --drain-timeout %v", drainDeadline)
	t.Logf("exited %v after SIGTERM (%d requests answered)", took.Round(time.Millisecond), ok.Load())
}

// TestSIGTERMDrainsUpInDeadline protects `verdict up`'s graceful stop:
// SIGTERM with work queued exits 0 within --shutdown-timeout (plus a
// small margin) and keeps what it did not finish in the queue for the next
// start, dead-lettering nothing.
func TestSIGTERMDrainsUpInDeadline(t *testing.T) {
	data := t.TempDir()
	p, url := startUp(t, "127.0.0.1:0", data, "--shutdown-timeout", drainDeadline.String())
	c := &http.Client{Timeout: 10 * time.Second}
	for i := range drainRequests {
		status, _, b, err := post(context.Background(), c, url+"/v1/decisions", semifBatch("updrain", i, 40), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, status, string(b))
	}
	took, err := p.terminate(t, drainDeadline+time.Minute)
	require.NoError(t, err, "exit status 0 after SIGTERM")
	require.LessOrEqual(t, took, drainDeadline+shutdownMargin, "verdict up exits within --shutdown-timeout %v", drainDeadline)
	stopped := p.waitLog(t, msgUpStopped, time.Second)
	t.Logf("exited %v after SIGTERM; %v messages left queued", took.Round(time.Millisecond), stopped["queued"])
	require.EqualValues(t, 0, stopped["dead_letters"])
	stored := len(readStore(t, filepath.Join(data, "results.db")))
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(data, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	defer q.Close()
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2*drainRequests, stored+2*(st.Visible+st.InFlight), "every decision is stored or still queued")
}

// TestSIGTERMStopsLongDecodeInDeadline protects the worker's bounded stop:
// SIGTERM while the engine is deep in long decodes, with more queued
// behind them, exits within --shutdown-timeout (plus a small margin): the
// engine stops cancelled work within one decode call instead of finishing
// its round or the jobs queued behind it. Needs the engine cancellation
// and bounded-Stop fixes of issue 15.
func TestSIGTERMStopsLongDecodeInDeadline(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, longDecodeShape+".gguf")
	out, err := exec.Command(verdictBin, "model", "synth", "--shape", longDecodeShape, "--seed", "1", "-o", model).CombinedOutput()
	require.NoError(t, err, "%s", out)
	data := filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(data, 0o755))

	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(data, "queue.db"), Name: "cpu"})
	require.NoError(t, err)
	defer q.Close()
	var msgs []queue.Outgoing
	for i := range longMessages {
		m, _ := envelope(t, "long", i, longStateReps)
		msgs = append(msgs, m)
	}
	sendAll(t, context.Background(), q, msgs)

	w := start(t, nil, "worker", "--queue", "local", "--data", data, "--model", model, "--threads", "2", "--ctx", "8192", "--batch", fmt.Sprint(longDecodeBatch),
		"--shutdown-timeout", drainDeadline.String(), "--wait", "1s", "--log-format", "json", "--log-level", "debug")
	w.waitLog(t, msgWorkerStarted, startTimeout)
	// SIGTERM once the first messages are being decoded.
	w.waitLog(t, "message", startTimeout)
	time.Sleep(time.Second)
	took, err := w.terminate(t, drainDeadline+2*time.Minute)
	require.NoError(t, err, "exit status 0 after SIGTERM")
	t.Logf("exited %v after SIGTERM", took.Round(time.Millisecond))
	require.LessOrEqual(t, took, drainDeadline+shutdownMargin, "the worker exits within --shutdown-timeout %v", drainDeadline)
	require.Zero(t, localDeadLetters(t, filepath.Join(data, "queue.db"), "cpu"))
	require.False(t, strings.Contains(w.Output(), "panic"), "no panic on the way out")
}
