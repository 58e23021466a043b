//go:build cgo

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine/enginetest"
	"github.com/verdict-dev/verdict/internal/batch"
	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestBatchSubmitKill9ThenResume runs `verdict batch --submit` against a
// real `verdict up` on the tiny synthetic model, kills it with SIGKILL
// while it submits and again while it collects, resumes it, and compares
// OUT.jsonl with a local `verdict batch` of the same file on the same
// model and policy: every line once, in input order, the same ids,
// statuses and choices, probabilities within the engine's batch
// invariance.
func TestBatchSubmitKill9ThenResume(t *testing.T) {
	bin := buildVerdict(t)
	dir := t.TempDir()
	mpath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(mpath, gguf.SynthOptions{Shape: "tiny", Seed: 3}))
	pol := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("kinds:\n  default: {min_probability: 0.1}\n"), 0o644))
	in := batchInput(t, dir, 120)
	common := []string{"batch", in, "--window", "8", "--max-line-bytes", "2048", "--max-state-bytes", "1000", "--progress", "plain", "--log-level", "warn"}

	want := filepath.Join(dir, "want.jsonl")
	cmd := exec.Command(bin, append(common, "-o", want, "-m", mpath, "--threads", "2", "--chunk", "4", "--policy", pol)...)
	stderr, err := cmd.CombinedOutput()
	require.Equal(t, 1, cmd.ProcessState.ExitCode(), "one line is over-long: %v\n%s", err, stderr)

	const key = "submit-test-key-0123456789"
	up := startUp(t, bin, "--data", filepath.Join(dir, "data"), "--model", mpath, "--policy", pol, "--api-keys", key+"=acme")
	got := filepath.Join(dir, "got.jsonl")
	state := batch.StatePath(got)
	submit := func(extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(append(common, "-o", got, "--submit", up.url, "--chunk", "2"), extra...)...)
		cmd.Env = append(os.Environ(), "VERDICT_API_KEY="+key)
		return cmd
	}
	lines := func(path string) int {
		b, _ := os.ReadFile(path)
		return strings.Count(string(b), "\n")
	}
	killWhen := func(cmd *exec.Cmd, ready func() bool) {
		t.Helper()
		require.NoError(t, cmd.Start())
		deadline := time.Now().Add(2 * time.Minute)
		for !ready() {
			require.True(t, time.Now().Before(deadline), "not ready within 2 minutes")
			time.Sleep(2 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}

	// Killed while submitting: the state file holds some chunks, not all.
	killWhen(submit(), func() bool { return lines(state) > 10 })
	b, err := os.ReadFile(state)
	require.NoError(t, err)
	require.NotContains(t, string(b), `"complete":true`, "killed before every chunk was sent")
	t.Logf("killed while submitting: %d chunks recorded", lines(state)-1)

	// Killed again (best effort: it may finish first) once it writes.
	killWhen(submit("--resume"), func() bool { return lines(got) > 0 })
	t.Logf("killed while collecting: %d lines written", lines(got))

	cmd = submit("--resume")
	out, err := cmd.CombinedOutput()
	require.Equal(t, 1, cmd.ProcessState.ExitCode(), "the over-long line: %v\n%s", err, out)
	require.Contains(t, string(out), "resumed)")
	require.Contains(t, string(out), "0 sent this run", "every chunk was sent before: %s", out)

	w, g := readRecords(t, want), readRecords(t, got)
	require.Len(t, g, len(w))
	for i := range w {
		require.Equal(t, w[i].Line, g[i].Line, "input order")
		require.Equal(t, w[i].ID, g[i].ID)
		require.Equal(t, w[i].Format, g[i].Format)
		require.Equal(t, w[i].Error, g[i].Error)
		require.Len(t, g[i].Results, len(w[i].Results))
		for j := range w[i].Results {
			wr, gr := w[i].Results[j], g[i].Results[j]
			require.Equal(t, wr.ID, gr.ID)
			require.Equal(t, batch.Status(&wr), batch.Status(&gr), "line %d", w[i].Line)
			require.Equal(t, wr.Chosen, gr.Chosen)
			require.Equal(t, wr.Line, gr.Line)
			require.InDeltaSlice(t, wr.Probabilities, gr.Probabilities, enginetest.ProbTol(1e-4))
		}
	}

	// A wrong key stops the run at once with a clear error.
	cmd = submit()
	cmd.Env = append(os.Environ(), "VERDICT_API_KEY=wrong-key-0123456789")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "HTTP 401")
}
