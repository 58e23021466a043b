//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/gguf"
)

// TestServeLoadsAnswersAndDrains runs `verdict serve` on a tiny synthetic
// model: /ping turns 200 once the model is loaded, requests are answered,
// and cancelling (what SIGTERM does) lets the request in flight finish
// before the command returns.
func TestServeLoadsAnswersAndDrains(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
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

// TestServeWithPolicyStartsServing is the regression test for `verdict
// serve --policy FILE` blocking on the SIGHUP watcher before it listened:
// with examples/policy.yaml it answers /ping, and /invocations answers
// carry the policy's outcome.
func TestServeWithPolicyStartsServing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(path, gguf.SynthOptions{Shape: "tiny", Seed: 1}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--addr", addr, "--model", path, "--threads", "1", "--ctx", "4096",
			"--policy", filepath.Join("..", "..", "examples", "policy.yaml"), "--log-level", "warn"})
	}()
	url := "http://" + addr
	ok := func() bool {
		resp, err := http.Get(url + "/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		select {
		case err := <-done:
			t.Fatalf("verdict serve --policy returned before serving: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("verdict serve --policy never answered /ping with 200")
		}
		time.Sleep(20 * time.Millisecond)
	}

	body := `{"id":"ticket-1","state":"I was charged twice for my subscription this month.","question":"Which team should handle this ticket?",
		"options":[{"id":"billing","description":"Billing."},{"id":"technical","description":"Technical."},{"id":"account","description":"Account."},{"id":"abuse","description":"Abuse."},{"id":"other","description":"Other."}]}`
	resp, err := http.Post(url+"/invocations", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var got struct {
		Result struct {
			Outcome *struct {
				Status string `json:"status"`
				Policy string `json:"policy"`
			} `json:"outcome"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(b, &got), string(b))
	require.NotNil(t, got.Result.Outcome, "the answer carries the policy's outcome: %s", b)
	require.NotEmpty(t, got.Result.Outcome.Status, string(b))
	require.NotEmpty(t, got.Result.Outcome.Policy, "the outcome names the policy that decided it: %s", b)

	cancel()
	require.NoError(t, <-done)
}
