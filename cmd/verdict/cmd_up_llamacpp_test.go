//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// upProcess is a `verdict up` child process.
type upProcess struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

// buildVerdict builds the command with llama.cpp, as `make build` does
// (plain go build: the binding finds the library through .verdict/llama).
// It is built once per test binary.
func buildVerdict(t *testing.T) string {
	t.Helper()
	builtVerdict.once.Do(func() {
		dir, err := os.MkdirTemp("", "verdict-bin")
		if err != nil {
			builtVerdict.err = err
			return
		}
		bin := filepath.Join(dir, "verdict")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			builtVerdict.err = fmt.Errorf("go build: %v: %s", err, out)
			return
		}
		builtVerdict.path = bin
	})
	require.NoError(t, builtVerdict.err)
	return builtVerdict.path
}

var builtVerdict struct {
	once sync.Once
	path string
	err  error
}

// startUp starts `verdict up` on a free port and waits for its listening
// line.
func startUp(t *testing.T, bin string, args ...string) *upProcess {
	t.Helper()
	return startUpEnv(t, bin, nil, args...)
}

// startUpEnv is startUp with env added to the test's environment.
func startUpEnv(t *testing.T, bin string, env []string, args ...string) *upProcess {
	t.Helper()
	p := &upProcess{done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"up", "--addr", "127.0.0.1:0", "--log-format", "json", "--threads", "2"}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.logs.Write(line)
			p.logs.WriteByte('\n')
			p.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "verdict up: listening" {
				addr <- rec.Addr
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("verdict up logs:\n%s", p.Logs())
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.done:
		t.Fatalf("verdict up exited before listening: %v\n%s", err, p.Logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("verdict up did not start listening:\n%s", p.Logs())
	}
	return p
}

func (p *upProcess) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *upProcess) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("verdict up did not exit")
		return nil
	}
}

func httpDo(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

var jsonCT = map[string]string{"Content-Type": "application/json"}

// TestUpEndToEnd submits both formats to `verdict up` over HTTP, reads the
// results back, and stops it with SIGTERM.
func TestUpEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	data := t.TempDir()
	p := startUp(t, bin, "--data", data)

	status, hdr, body := httpDo(t, "POST", p.url+"/v1/decisions", `{"decision": {"id": "route", "state": "Customer cannot log in after a password reset.",
		"question": "Which queue should handle this request?", "options": [{"id": "account", "description": "Account access."}, {"id": "billing", "description": "Billing."}]}}`, jsonCT)
	require.Equal(t, http.StatusAccepted, status, string(body))
	var semif struct {
		RequestID   string   `json:"request_id"`
		DecisionIDs []string `json:"decision_ids"`
		Results     string   `json:"results"`
	}
	require.NoError(t, json.Unmarshal(body, &semif))
	require.Equal(t, []string{"route"}, semif.DecisionIDs)
	require.Equal(t, "/v1/requests/"+semif.RequestID, hdr.Get("Location"))

	status, hdr, body = httpDo(t, "POST", p.url+"/v1/systemone/async", `{"model": "jev-latest", "state": {"ticket": "Charged twice for March."},
		"questions": {"refund": {"type": "noul", "instructions": "Does the customer want money back?"},
		"urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]}}}`, jsonCT)
	require.Equal(t, http.StatusAccepted, status, string(body))
	require.NotEmpty(t, hdr.Get("X-Typesafe-Request-Id"))
	var s1 struct {
		RequestID string `json:"request_id"`
	}
	require.NoError(t, json.Unmarshal(body, &s1))

	// Errors keep the front door's shape.
	status, _, body = httpDo(t, "POST", p.url+"/v1/decisions", `{"state": "s", "question": "q?", "options": [{"id": "a", "description": ""}]}`, jsonCT)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, string(body), `"path":"options"`)
	status, _, _ = httpDo(t, "POST", p.url+"/v1/decisions", `{}`, map[string]string{"Content-Type": "text/plain"})
	require.Equal(t, http.StatusUnsupportedMediaType, status)
	status, _, _ = httpDo(t, "GET", p.url+"/v1/requests/req_unknown", "", nil)
	require.Equal(t, http.StatusNotFound, status)

	var st results.Request
	require.Eventually(t, func() bool {
		status, _, body := httpDo(t, "GET", p.url+"/v1/requests/"+s1.RequestID, "", nil)
		require.Equal(t, http.StatusOK, status, string(body))
		require.NoError(t, json.Unmarshal(body, &st))
		return st.Status == "done"
	}, 60*time.Second, 100*time.Millisecond)
	require.Equal(t, "jev-latest", st.Model)
	require.Equal(t, 2, st.Total)
	for _, d := range st.Decisions {
		var rec sink.Record
		require.NoError(t, json.Unmarshal(d.Record, &rec))
		require.Nil(t, rec.Result.Error)
		require.NotEmpty(t, rec.Result.Probabilities)
		require.Equal(t, "systemone", rec.Format)
	}

	require.Eventually(t, func() bool {
		status, _, body := httpDo(t, "GET", p.url+"/v1/decisions/route?request_id="+semif.RequestID, "", nil)
		return status == http.StatusOK && strings.Contains(string(body), `"status":"done"`)
	}, 60*time.Second, 100*time.Millisecond)
	status, _, body = httpDo(t, "GET", p.url+"/v1/decisions/route", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), semif.RequestID)

	// The true answer goes back in, and the live quality metrics count it.
	status, _, body = httpDo(t, "POST", p.url+"/v1/decisions/route/feedback?request_id="+semif.RequestID, `{"option":"account","source":"test"}`, jsonCT)
	require.Equal(t, http.StatusCreated, status, string(body))

	status, _, body = httpDo(t, "GET", p.url+"/metrics", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), "verdict_worker_")
	require.Contains(t, string(body), "verdict_feedback_total{")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "a clean exit on SIGTERM")
	require.Contains(t, p.Logs(), "verdict up: stopped")
	// Everything opened was closed: SQLite removes a file's -wal journal
	// when its last connection closes.
	for _, db := range []string{"queue.db", "requests.db", "results.db"} {
		require.FileExists(t, filepath.Join(data, db))
		require.NoFileExists(t, filepath.Join(data, db+"-wal"), "%s was not closed", db)
	}
	require.FileExists(t, filepath.Join(data, "models", "verdict-synth-tiny-seed1.gguf"), "a model was synthesized into --data")
}

// TestUpRestartSafety kills `verdict up` (SIGKILL) with work still queued,
// starts it again on the same data directory, and checks that every
// accepted decision completes exactly once.
func TestUpRestartSafety(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	data := t.TempDir()
	p := startUp(t, bin, "--data", data, "--visibility", "2s", "--concurrency", "1")

	const requests = 24
	var ids []string
	for i := range requests {
		state := strings.Repeat(fmt.Sprintf("Ticket %d: the customer reports problem number %d with their account and billing. ", i, i), 12)
		body := fmt.Sprintf(`{"decisions": [
			{"id": "queue", "state": %[1]q, "question": "Which queue?", "options": [{"id": "account", "description": "Account."}, {"id": "billing", "description": "Billing."}, {"id": "other", "description": "Other."}]},
			{"id": "urgent", "state": %[1]q, "question": "Is it urgent?", "options": [{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]}]}`, state)
		status, _, out := httpDo(t, "POST", p.url+"/v1/decisions", body, map[string]string{"Content-Type": "application/json", "Idempotency-Key": fmt.Sprintf("restart-%d", i)})
		require.Equal(t, http.StatusAccepted, status, string(out))
		var acc struct {
			RequestID string `json:"request_id"`
		}
		require.NoError(t, json.Unmarshal(out, &acc))
		ids = append(ids, acc.RequestID)
	}
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.wait(t)

	store, err := results.OpenFile(filepath.Join(data, "results.db"))
	require.NoError(t, err)
	n, err := store.Count(context.Background())
	require.NoError(t, err)
	require.NoError(t, store.Close())
	require.Less(t, n, 2*requests, "work was still queued when the process was killed")
	t.Logf("%d of %d results stored before the kill", n, 2*requests)

	p2 := startUp(t, bin, "--data", data, "--visibility", "2s")
	// The restarted process takes new work too.
	status, _, out := httpDo(t, "POST", p2.url+"/v1/decisions", `{"id": "x", "state": "s", "question": "q?", "options": [{"id": "a", "description": ""}, {"id": "b", "description": ""}]}`,
		map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusAccepted, status, string(out))

	for _, id := range ids {
		require.Eventually(t, func() bool {
			status, _, body := httpDo(t, "GET", p2.url+"/v1/requests/"+id, "", nil)
			require.Equal(t, http.StatusOK, status, string(body))
			var st results.Request
			require.NoError(t, json.Unmarshal(body, &st))
			return st.Status == "done" && st.Done == 2
		}, 90*time.Second, 100*time.Millisecond, "request %s", id)
	}
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p2.wait(t))

	store, err = results.OpenFile(filepath.Join(data, "results.db"))
	require.NoError(t, err)
	defer store.Close()
	n, err = store.Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2*requests+1, n, "every decision has exactly one stored result")
}

// TestRunExamplesScript runs the main job (`make run` after `make build`):
// scripts/run-examples.sh against a freshly built binary.
func TestRunExamplesScript(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("SKIPPED: curl is not installed; scripts/run-examples.sh needs it")
	}
	bin := buildVerdict(t)
	cmd := exec.Command("../../scripts/run-examples.sh")
	cmd.Env = append(os.Environ(), "VERDICT_BIN="+bin, "RUN_TIMEOUT=120", "VERDICT_MODEL=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	files, err := filepath.Glob("../../examples/requests/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		require.Contains(t, string(out), "== "+filepath.Base(f))
	}
	require.Contains(t, string(out), "decided")
	require.Contains(t, string(out), "verdict up stopped cleanly")
}

// TestMain removes the binary that buildVerdict built once for all tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtVerdict.path != "" {
		os.RemoveAll(filepath.Dir(builtVerdict.path))
	}
	os.Exit(code)
}
