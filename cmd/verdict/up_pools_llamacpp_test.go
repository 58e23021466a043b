//go:build cgo

package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestUpRoutesToCPUAndGPUPools runs `verdict up --pools cpu,gpu` and checks
// that the router's rules pick the pool (an explicit route, priority
// interactive, the default), that each pool's worker scores what its queue
// receives (per-queue metrics), and that /v1/status reports both queues.
// On this CPU-only machine the gpu pool's engine runs on the CPU too; its
// status names the backend it actually uses.
func TestUpRoutesToCPUAndGPUPools(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	p := startUp(t, bin, "--data", t.TempDir(), "--pools", "cpu,gpu")

	post := func(id, extra string) {
		body := `{"decision": {"id": "` + id + `", "state": "The printer on floor 3 is out of toner.", "question": "Which team?",
			"options": [{"id": "it", "description": "IT."}, {"id": "facilities", "description": "Facilities."}]` + extra + `}}`
		status, _, out := httpDo(t, "POST", p.url+"/v1/decisions", body, jsonCT)
		require.Equal(t, http.StatusAccepted, status, string(out))
	}
	post("explicit", `, "route": "gpu"`)
	post("interactive", `, "priority": "interactive"`)
	post("plain", ``)

	decided := regexp.MustCompile(`verdict_worker_decisions_total\{queue="(cpu|gpu)",status="[a-z_]+"\} (\d+)`)
	counts := map[string]int{}
	require.Eventually(t, func() bool {
		status, _, body := httpDo(t, "GET", p.url+"/metrics", "", nil)
		require.Equal(t, http.StatusOK, status)
		counts = map[string]int{}
		for _, m := range decided.FindAllStringSubmatch(string(body), -1) {
			n, _ := strconv.Atoi(m[2])
			counts[m[1]] += n
		}
		return counts["cpu"]+counts["gpu"] == 3
	}, 60*time.Second, 100*time.Millisecond, "three decisions scored")
	require.Equal(t, map[string]int{"gpu": 2, "cpu": 1}, counts, "route gpu and priority interactive go to the gpu pool, the rest to cpu")

	status, _, body := httpDo(t, "GET", p.url+"/v1/status", "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var st struct {
		Pools map[string]struct {
			Queued   int    `json:"queued"`
			InFlight int    `json:"in_flight"`
			Backend  string `json:"backend"`
		} `json:"pools"`
	}
	require.NoError(t, json.Unmarshal(body, &st))
	require.Len(t, st.Pools, 2)
	for _, pool := range []string{"cpu", "gpu"} {
		require.Contains(t, st.Pools, pool)
		require.Equal(t, "CPU", st.Pools[pool].Backend, "this machine has no GPU: the model block and status say so")
		require.Zero(t, st.Pools[pool].Queued+st.Pools[pool].InFlight)
	}
	require.Contains(t, p.Logs(), "the gpu pool runs on the CPU")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t))
}

// TestUpPoolsWithTheirOwnModels: with --gpu-model the gpu pool loads
// its own model (a bigger one, for a cascade) and the cpu pool keeps
// --model: each decision's record names the model of the pool that
// scored it.
func TestUpPoolsWithTheirOwnModels(t *testing.T) {
	t.Parallel()
	bin := buildVerdict(t)
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.gguf"), filepath.Join(dir, "big.gguf")
	require.NoError(t, gguf.Synth(small, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	require.NoError(t, gguf.Synth(big, gguf.SynthOptions{Shape: "tiny", Seed: 2}))
	p := startUp(t, bin, "--data", filepath.Join(dir, "data"), "--pools", "cpu,gpu", "--model", small, "--gpu-model", big)

	recs := submitAndWait(t, p.url, `{"decisions": [
		{"id": "on-cpu", "state": "Toner is out.", "question": "Which team?", "options": [{"id": "it", "description": "IT."}, {"id": "facilities", "description": "Facilities."}]},
		{"id": "on-gpu", "state": "The VPN drops.", "question": "Which team?", "route": "gpu", "options": [{"id": "it", "description": "IT."}, {"id": "facilities", "description": "Facilities."}]}]}`)
	files := map[string]string{}
	for id, rec := range recs {
		require.NotNil(t, rec.Result.Model, id)
		files[id] = rec.Result.Model.File
	}
	require.Equal(t, map[string]string{"on-cpu": "small.gguf", "on-gpu": "big.gguf"}, files)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t))
}

func TestUpPoolsFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"cpu", ""}, {"gpu", ""}, {"cpu,gpu", ""}, {"gpu, cpu", ""},
		{"", `"" is not a pool`}, {"tpu", `"tpu" is not a pool`}, {"cpu,cpu", `"cpu" is named twice`},
	} {
		_, err := parsePools(tc.in)
		if tc.want == "" {
			require.NoError(t, err, tc.in)
		} else {
			require.ErrorContains(t, err, tc.want, tc.in)
			require.ErrorContains(t, err, "flag --pools")
		}
	}
}
