//go:build cgo

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

func readRecords(t *testing.T, path string) []batch.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []batch.Record
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r batch.Record
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		out = append(out, r)
	}
	return out
}

// batchInput writes n SemIf lines over a few shared states, a System One
// line, and an over-long line in the middle.
func batchInput(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		if i == n/2 {
			fmt.Fprintf(&b, `{"id":"long","state":%q,"question":"q?","options":[{"id":"a","description":""},{"id":"b","description":""}]}`+"\n", strings.Repeat("x", 5000))
		}
		if i == n/3 {
			b.WriteString(`{"id":"case-1","state":"The printer is on fire.","questions":{"urgent":{"type":"noul","instructions":"Is it urgent?"},"team":{"type":"choice","instructions":"Which team?","criteria":{"it":"IT.","facilities":"Facilities."}}}}` + "\n")
		}
		fmt.Fprintf(&b, `{"id":"d%d","state":"Ticket %d: the VPN drops every hour since the update.","question":"Which queue, variant %d?","options":[{"id":"network","description":"Network team."},{"id":"desktop","description":"Desktop support."},{"id":"other","description":"Anything else."}]}`+"\n", i, i%4, i)
	}
	path := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// TestBatchKill9ThenResume kills `verdict batch` with SIGKILL once it has
// written part of its output, resumes it, and compares with an
// uninterrupted run: the same records, line for line, none torn or
// duplicated (timings differ run to run; scores within the engine's batch
// invariance).
func TestBatchKill9ThenResume(t *testing.T) {
	bin := buildVerdict(t)
	dir := t.TempDir()
	mpath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(mpath, gguf.SynthOptions{Shape: "tiny", Seed: 3}))
	in := batchInput(t, dir, 120)
	common := []string{"batch", in, "-m", mpath, "--threads", "2", "--window", "8", "--chunk", "4", "--max-line-bytes", "2048", "--max-state-bytes", "1000", "--progress", "plain", "--log-level", "warn"}

	want := filepath.Join(dir, "want.jsonl")
	cmd := exec.Command(bin, append(common, "-o", want)...)
	stderr, err := cmd.CombinedOutput()
	require.Error(t, err, "one line is over-long: exit status 1")
	require.Equal(t, 1, cmd.ProcessState.ExitCode(), "%s", stderr)
	require.Contains(t, string(stderr), "verdict batch: 122 lines (1 failed to parse, 0 resumed), 122 decisions")
	require.Contains(t, string(stderr), "batch: done: 122 lines")

	got, errs := filepath.Join(dir, "got.jsonl"), filepath.Join(dir, "errors.jsonl")
	cmd = exec.Command(bin, append(common, "-o", got, "--errors", errs)...)
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := os.Stat(got)
		if err == nil && st.Size() > 4096 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no output within 2 minutes")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	partial := readRecordsTolerant(t, got)
	require.Less(t, partial, 122, "killed before the end")

	cmd = exec.Command(bin, append(common, "-o", got, "--errors", errs, "--resume")...)
	out, _ := cmd.CombinedOutput()
	require.Contains(t, string(out), "resumed)")

	w, g := readRecords(t, want), readRecords(t, got)
	require.Len(t, g, len(w))
	for i := range w {
		require.Equal(t, w[i].Line, g[i].Line)
		require.Equal(t, w[i].ID, g[i].ID)
		require.Equal(t, w[i].Error, g[i].Error)
		require.Len(t, g[i].Results, len(w[i].Results))
		for j := range w[i].Results {
			require.Equal(t, w[i].Results[j].ID, g[i].Results[j].ID)
			require.Equal(t, w[i].Results[j].Chosen, g[i].Results[j].Chosen)
			require.InDeltaSlice(t, w[i].Results[j].Probabilities, g[i].Results[j].Probabilities, enginetest.ProbTol(1e-4))
		}
	}
	e := readRecords(t, errs)
	require.Len(t, e, 1, "the over-long line, once")
	require.EqualValues(t, "too_large", e[0].Error.Code)
}

// readRecordsTolerant counts whole lines of a file that may end torn.
func readRecordsTolerant(t *testing.T, path string) int {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		n++
	}
	return n
}

// TestCalibrationFileIsPinnedAndReported: a file pinned to another model
// is refused at start; the right one is applied and every result says so.
func TestCalibrationFileIsPinnedAndReported(t *testing.T) {
	dir := t.TempDir()
	mpath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(mpath, gguf.SynthOptions{Shape: "tiny", Seed: 3, Chat: "chatml"}))
	info, err := gguf.Inspect(mpath, true)
	require.NoError(t, err)
	write := func(name, sha, prompt string) string {
		p := filepath.Join(dir, name)
		body := fmt.Sprintf(`{"format":"verdict-calibration/1","method":"temperature","model_sha256":%q,"prompt_version":%q,"temperature":2.5,"samples":10}`, sha, prompt)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	in := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(`{"id":"a","state":"s","question":"q?","options":[{"id":"x","description":""},{"id":"y","description":""}]}`+"\n"), 0o644))
	capture := func(args ...string) (string, error) {
		f, err := os.CreateTemp(dir, "out")
		require.NoError(t, err)
		old := os.Stdout
		os.Stdout = f
		err = runScore(t.Context(), args)
		os.Stdout = old
		require.NoError(t, f.Close())
		b, _ := os.ReadFile(f.Name())
		return string(b), err
	}
	_, err = capture("-m", mpath, "--log-level", "warn", "--calibration", write("other.json", strings.Repeat("0", 64), "verdict-v1/chatml"), in)
	require.ErrorContains(t, err, "pinned to model sha256 000000000000")
	_, err = capture("-m", mpath, "--log-level", "warn", "--calibration", write("prompt.json", info.SHA256, "verdict-v1/plain"), in)
	require.ErrorContains(t, err, "pinned to prompt verdict-v1/plain")

	good := write("good.json", info.SHA256, "verdict-v1/chatml")
	out, err := capture("-m", mpath, "--log-level", "warn", "--calibration", good, "--temperature", "7", in)
	require.NoError(t, err)
	rs := scoreLines(t, []byte(out))
	require.True(t, rs[0].Calibrated)
	require.Equal(t, 2.5, rs[0].Temperature)
	require.Equal(t, "calibration", rs[0].TemperatureSource)
	require.Len(t, rs[0].CalibrationSHA256, 64)

	pol := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("kinds:\n  default: {min_probability: 0.1}\n  hot: {temperature: 3}\n"), 0o644))
	out, err = capture("-m", mpath, "--log-level", "warn", "--temperature", "7", "--policy", pol, in)
	require.NoError(t, err)
	rs = scoreLines(t, []byte(out))
	require.False(t, rs[0].Calibrated)
	require.Equal(t, 7.0, rs[0].Temperature, "a policy without a kind temperature keeps --temperature")
	require.Equal(t, "flag", rs[0].TemperatureSource)
	require.Equal(t, "decided", string(rs[0].Outcome.Status))

	hot := filepath.Join(dir, "hot.jsonl")
	require.NoError(t, os.WriteFile(hot, []byte(`{"id":"a","kind":"hot","state":"s","question":"q?","options":[{"id":"x","description":""},{"id":"y","description":""}]}`+"\n"), 0o644))
	out, err = capture("-m", mpath, "--log-level", "warn", "--temperature", "7", "--policy", pol, hot)
	require.NoError(t, err)
	rs = scoreLines(t, []byte(out))
	require.Equal(t, 3.0, rs[0].Temperature, "the kind's temperature wins over the flag")
	require.Equal(t, "policy", rs[0].TemperatureSource)
}

// TestEvalJevBenchSubsetEndToEnd runs `verdict eval --model` on the first
// cases of the real JevBench-240 file (the README reports the full run).
func TestEvalJevBenchSubsetEndToEnd(t *testing.T) {
	src := os.Getenv("JEVBENCH")
	if src == "" {
		t.Skip("JEVBENCH is not set: run make jevbench, then JEVBENCH=.verdict/data/jevbench-240 (or JEVBENCH=DIR of a copy)")
	}
	dir := t.TempDir()
	head := func(name string, n int) {
		b, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		lines := strings.SplitAfter(string(b), "\n")
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines[:n], "")), 0o644))
	}
	head("cases.jsonl", 6)
	head("gold.jsonl", 240)
	mpath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(mpath, gguf.SynthOptions{Shape: "tiny", Seed: 1, Chat: "chatml"}))
	f, err := os.CreateTemp(dir, "report")
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = f
	err = runEval(t.Context(), []string{dir, "-m", mpath, "--threads", "2", "--json", "--svg", filepath.Join(dir, "rel.svg"), "--progress", "none", "--debias", "2", "--log-level", "warn"})
	os.Stdout = old
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	var rep struct {
		Labeled   int     `json:"labeled"`
		ValidRate float64 `json:"valid_rate"`
		Bins      []struct {
			Count int `json:"count"`
		} `json:"ece_bins"`
		Notes map[string]string `json:"notes"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Greater(t, rep.Labeled, 30)
	require.Equal(t, 1.0, rep.ValidRate)
	total := 0
	for _, bin := range rep.Bins {
		total += bin.Count
	}
	require.Equal(t, rep.Labeled, total)
	require.Equal(t, "2 rotations", rep.Notes["debias"])
	svg, err := os.ReadFile(filepath.Join(dir, "rel.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	require.Contains(t, string(svg), "ECE ")
}
