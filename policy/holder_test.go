package policy_test

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

const (
	policyV1 = "kinds: {default: {min_probability: 0.5}}\n"
	policyV2 = "kinds: {default: {min_probability: 0.9}}\n"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write then rename, as an operator's deploy would: readers never see a
	// half-written file.
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// minProbOf reports which version is in force by the outcome of p=0.7.
func statusAt07(p *policy.Policy) decision.Status {
	d := newDecision("q", "x", "a", "b")
	plan := p.Before(d, policy.Caller{})
	r := p.After(plan, decision.Result{Probabilities: []float64{0.7, 0.3}}, nil)
	return r.Outcome.Status
}

func TestHolderReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, path, policyV1)
	h, err := policy.NewHolder(path)
	require.NoError(t, err)
	require.Equal(t, path, h.Path())
	v1 := h.Current()
	require.Equal(t, decision.StatusDecided, statusAt07(v1))

	tests := []struct {
		name    string
		content string // "" removes the file
		wantErr error
		want    decision.Status
	}{
		{name: "good file swaps", content: policyV2, want: decision.StatusAbstained},
		{name: "invalid file keeps old", content: "kinds: {default: {min_probability: 9}}\n", wantErr: policy.ErrInvalid, want: decision.StatusAbstained},
		{name: "bad rule keeps old", content: "kinds: {default: {rules: [{when: 'nope(', option: a}]}}\n", wantErr: policy.ErrInvalid, want: decision.StatusAbstained},
		{name: "empty file keeps old", content: "\n", wantErr: policy.ErrInvalid, want: decision.StatusAbstained},
		{name: "missing file keeps old", content: "", wantErr: policy.ErrRead, want: decision.StatusAbstained},
		{name: "good file again", content: policyV1, want: decision.StatusDecided},
	}
	for _, tt := range tests { // sequential: each step builds on the last
		before := h.Current()
		if tt.content == "" {
			require.NoError(t, os.Remove(path))
		} else {
			writeFile(t, path, tt.content)
		}
		err := h.Reload()
		if tt.wantErr != nil {
			require.ErrorIs(t, err, tt.wantErr, tt.name)
			require.Contains(t, err.Error(), "kept version "+before.Version()[:12], tt.name)
			require.Same(t, before, h.Current(), tt.name)
		} else {
			require.NoError(t, err, tt.name)
			require.NotSame(t, before, h.Current(), tt.name)
		}
		require.Equal(t, tt.want, statusAt07(h.Current()), tt.name)
	}
	require.Equal(t, v1.Version(), h.Current().Version())
}

func TestNewHolder(t *testing.T) {
	t.Parallel()
	h, err := policy.NewHolder("")
	require.NoError(t, err)
	require.Equal(t, "default", h.Current().Version())
	require.NoError(t, h.Reload())

	_, err = policy.NewHolder(filepath.Join(t.TempDir(), "none.yaml"))
	require.ErrorIs(t, err, policy.ErrRead)

	p := mustParse(t, policyV2)
	h = policy.HolderOf(p)
	require.Same(t, p, h.Current())
	require.NoError(t, h.Reload())
	require.Equal(t, "default", policy.HolderOf(nil).Current().Version())
}

// TestHolderConcurrent reloads while readers use the policy; run with -race.
func TestHolderConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, path, policyV1)
	h, err := policy.NewHolder(path)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				s := statusAt07(h.Current())
				if s != decision.StatusDecided && s != decision.StatusAbstained {
					panic("unexpected status " + s)
				}
			}
		}()
	}
	for i := range 20 {
		content := policyV1
		if i%2 == 1 {
			content = policyV2
		}
		writeFile(t, path, content)
		require.NoError(t, h.Reload())
	}
	cancel()
	wg.Wait()
}

// TestWatchSIGHUP sends SIGHUP to this process. The test registers its own
// channel for SIGHUP first and never stops it, so a signal that arrives
// before the watcher has registered, or after it stopped (a late one of
// the retries below), cannot kill the test binary: stopping the last
// channel restores SIGHUP's default action, which ends the process.
func TestWatchSIGHUP(t *testing.T) {
	guard := make(chan os.Signal, 1) // a full channel drops further signals
	signal.Notify(guard, syscall.SIGHUP)

	path := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, path, policyV1)
	h, err := policy.NewHolder(path)
	require.NoError(t, err)
	v1 := h.Current().Version()

	errs := make(chan error, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.WatchSIGHUP(ctx, func(err error) { errs <- err })
	}()
	defer func() {
		cancel()
		<-done
	}()

	hup := func() { require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP)) }

	// A good file is picked up.
	writeFile(t, path, policyV2)
	require.Eventually(t, func() bool {
		hup()
		return h.Current().Version() != v1
	}, 10*time.Second, 50*time.Millisecond)
	v2 := h.Current().Version()
	require.Equal(t, decision.StatusAbstained, statusAt07(h.Current()))

	// A bad file is reported and the policy stays.
	writeFile(t, path, "kinds: {default: {fallback: maybe}}\n")
	var got error
	require.Eventually(t, func() bool {
		hup()
		select {
		case got = <-errs:
			return true
		default:
			return false
		}
	}, 10*time.Second, 50*time.Millisecond)
	require.ErrorIs(t, got, policy.ErrInvalid)
	require.Contains(t, got.Error(), "kinds.default.fallback")
	require.Equal(t, v2, h.Current().Version())

	// After ctx is done the watcher returns.
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("WatchSIGHUP did not return after cancel")
	}
}
