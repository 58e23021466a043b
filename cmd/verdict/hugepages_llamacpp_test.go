//go:build cgo

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/hugepages"
)

// loadedLine is the engine's "model loaded" log line of a JSON log.
func loadedLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "llamacpp: model loaded" {
			return m
		}
	}
	t.Fatalf("no model loaded line in:\n%s", logs)
	return nil
}

// TestWeightsOnHugePages runs the real binary: where the kernel gives
// transparent huge pages on request and glibc honours its malloc tunable,
// `verdict serve` on the CPU restarts itself with the tunable (same pid)
// and reads the weights into memory on huge pages; VERDICT_HUGEPAGES=off
// and --mmap on keep the mapped file; both score the same; a bad --mmap is
// refused naming the flag.
func TestWeightsOnHugePages(t *testing.T) {
	if mode := hugepages.Mode(); mode != "madvise" && mode != "always" {
		t.Skipf("transparent huge pages are %q here", mode)
	}
	if !llamacpp.GlibcHugePagesTunable() {
		t.Skip("glibc before 2.35 has no glibc.malloc.hugetlb")
	}
	bin := buildVerdict(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "medium.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "medium", Seed: 1}))
	st, err := os.Stat(path)
	require.NoError(t, err)
	fileMiB := float64(st.Size()) / (1 << 20)

	serve := func(env []string, args ...string) (map[string]any, int64, string) {
		p := startVerdict(t, bin, env, append([]string{"serve", "--addr", "127.0.0.1:0", "--model", path, "--threads", "2",
			"--ctx", "1024", "--gpu-layers", "0", "--log-format", "json"}, args...)...)
		p.waitMsg(t, "model loaded")
		huge, err := hugepages.AnonHuge(p.cmd.Process.Pid)
		require.NoError(t, err)
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/environ")
		require.NoError(t, err)
		p.stop(t)
		return loadedLine(t, p.Logs()), huge, string(environ)
	}

	line, huge, environ := serve(nil)
	require.Equal(t, "off", line["mmap"], "read into memory by default on the CPU")
	require.GreaterOrEqual(t, line["weights_hugepages_mib"].(float64), 0.9*fileMiB, "the weights on huge pages")
	require.GreaterOrEqual(t, float64(huge)/(1<<20), 0.9*fileMiB, "AnonHugePages of the serving process")
	if hugepages.Mode() == "madvise" {
		require.Contains(t, environ, hugepages.Tunable+"=1", "the same pid runs with the tunable: re-executed")
	}

	line, huge, environ = serve([]string{hugepages.EnvSwitch + "=off"})
	require.Equal(t, "on", line["mmap"], "no huge pages asked for: the file stays mapped")
	require.Zero(t, line["weights_hugepages_mib"])
	require.NotContains(t, environ, hugepages.Tunable)
	if hugepages.Mode() == "madvise" {
		require.Less(t, float64(huge)/(1<<20), 0.5*fileMiB)
	}

	line, _, _ = serve(nil, "--mmap", "on")
	require.Equal(t, "on", line["mmap"], "--mmap on wins over auto")
	require.Zero(t, line["weights_hugepages_mib"])

	// The same decision scores the same from either memory.
	in := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(`{"id":"d1","state":"The export failed 8 times for 60 users.","question":"Which team?","options":[{"id":"eng","description":"Engineering"},{"id":"billing","description":"Billing"},{"id":"success","description":"Success"}]}`+"\n"), 0o600))
	score := func(mmap string) string {
		cmd := exec.Command(bin, "score", "--model", path, "--threads", "2", "--ctx", "1024", "--gpu-layers", "0", "--mmap", mmap, "--log-level", "warn", in)
		out, err := cmd.Output()
		require.NoError(t, err, "%s", out)
		var r struct {
			OptionLogits []float64 `json:"option_logits"`
		}
		require.NoError(t, json.Unmarshal(out, &r), "%s", out)
		require.Len(t, r.OptionLogits, 3, "%s", out)
		l, _ := json.Marshal(r.OptionLogits)
		return string(l)
	}
	require.Equal(t, score("on"), score("off"))

	cmd := exec.Command(bin, "score", "--model", path, "--mmap", "sometimes", in)
	text, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(text), "--mmap")
	require.Contains(t, string(text), `must be auto, on or off, got "sometimes"`)
}
