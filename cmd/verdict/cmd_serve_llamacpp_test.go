//go:build llamacpp

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/model"
)

// TestServeLoadsAnswersAndDrains runs `verdict serve` on a tiny synthetic
// model: /ping turns 200 once the model is loaded, requests are answered,
// and cancelling (what SIGTERM does) lets the request in flight finish
// before the command returns.
func TestServeLoadsAnswersAndDrains(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, model.Synth(path, model.SynthOptions{Shape: "tiny", Seed: 1}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--addr", addr, "--model", path, "--threads", "1", "--ctx", "16384", "--log-level", "warn"})
	}()
	url := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 10*time.Millisecond)

	// A batch of different long states keeps the engine busy for a while.
	var ds []string
	for i := range 8 {
		state := strings.Repeat(fmt.Sprintf("Line %d of a long ticket about case %d. ", i, i), 20)
		ds = append(ds, fmt.Sprintf(`{"state":%q,"question":"Which queue?","options":[{"id":"a","description":"A."},{"id":"b","description":"B."}]}`, state))
	}
	body := `{"decisions":[` + strings.Join(ds, ",") + `]}`
	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Post(url+"/invocations", "application/json", strings.NewReader(body))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{status: resp.StatusCode, body: string(b)}
	}()
	// Wait until it is being scored, then ask the server to stop.
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "verdict_admission_in_flight 1")
	}, 30*time.Second, time.Millisecond)
	cancel()

	a := <-got
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `"results":[`)
	require.NoError(t, <-done)
	_, err = http.Get(url + "/ping")
	require.Error(t, err, "the listener is closed after the drain")
}
