package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/client"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/server"
)

// uniform is a scorer for wire tests (the real engine is tested elsewhere):
// equal logits for every option.
type uniform struct{ err error }

func (u uniform) Score(_ context.Context, ds []decision.Decision) ([]decision.Result, error) {
	if u.err != nil {
		return nil, u.err
	}
	out := make([]decision.Result, len(ds))
	for i := range ds {
		engine.Readout(&out[i], &ds[i], make([]float64, len(ds[i].Options)), 1)
		out[i].Tokens = &decision.Tokens{Input: 7, StatePrefix: 3}
	}
	return out, nil
}

func serve(t *testing.T, cfg server.Config) string {
	t.Helper()
	if cfg.Scorer == nil {
		cfg.Scorer = uniform{}
	}
	cfg.Model = decision.ModelIdentity{File: "/m/tiny.gguf"}
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := server.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestClientAgainstVerdict(t *testing.T) {
	t.Parallel()
	c := &client.Client{BaseURL: serve(t, server.Config{APIKeys: map[string]string{"k": ""}}), APIKey: "k"}
	ctx := context.Background()
	models, err := c.Models(ctx)
	require.NoError(t, err)
	require.Equal(t, "tiny", models[0].Name)
	require.Equal(t, "tiny", models[1].AliasFor)

	r, err := c.SystemOne(ctx, map[string]any{"model": "default", "state": "s", "questions": map[string]any{
		"q": map[string]any{"type": "score", "instructions": nil, "criteria": []any{"bad", nil, "good"}}}})
	require.NoError(t, err)
	require.InDelta(t, 1.0, *r.Answers["q"].Score, 1e-9)
	require.Nil(t, r.Answers["q"].Legend["1"])

	ds := []decision.Decision{{ID: "a", State: decision.State{Text: "s"}, Question: "q?", Options: []decision.Option{{ID: "x"}, {ID: "y"}}}}
	res, timing, err := c.Score(ctx, ds)
	require.NoError(t, err)
	require.Equal(t, "a", res[0].ID)
	require.Contains(t, string(timing), `"batch_size":1`)

	// 4xx: not retried, both error shapes decoded.
	_, err = c.SystemOne(ctx, map[string]any{"state": "s", "questions": map[string]any{"q": map[string]any{"type": "choice", "criteria": map[string]any{"a": nil}}}})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 422, ae.Status)
	require.Equal(t, "invalid_request_error", ae.Type)
	require.Equal(t, "questions.q.criteria", ae.Fields[0].Path)
	_, err = c.Post(ctx, "/invocations", []byte(`{"decisions":[]}`))
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.Status)
	require.Contains(t, ae.Message, "nonempty decisions list")
	require.NotEmpty(t, ae.RequestID)
}

// A busy verdict (503 on /invocations, 529 on /v1/systemone) is retried
// honouring Retry-After, then given up with ErrGaveUp.
func TestClientRetriesOverload(t *testing.T) {
	t.Parallel()
	url := serve(t, server.Config{Scorer: uniform{err: engine.ErrBusy}, RetryAfter: time.Second})
	c := &client.Client{BaseURL: url, Retry: client.Retry{MaxAttempts: 2, BaseDelay: time.Millisecond}}
	_, err := c.SystemOne(context.Background(), map[string]any{"state": "s", "questions": map[string]any{"q": map[string]any{"type": "noul"}}})
	require.ErrorIs(t, err, client.ErrGaveUp)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.StatusOverloaded, ae.Status)
	require.Equal(t, time.Second, ae.RetryAfter) // the wait itself: TestBackoffWaitsRetryAfter

	_, _, err = c.Score(context.Background(), []decision.Decision{{State: decision.State{Text: "s"}, Question: "q?", Options: []decision.Option{{ID: "x"}, {ID: "y"}}}})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)
	require.True(t, ae.Retryable)
}

func TestDoRetriesOnlyRetryable(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	_, attempts, err := client.Do(context.Background(), client.Retry{BaseDelay: time.Millisecond}, func(context.Context) (int, error) {
		n.Add(1)
		return 0, errors.New("permanent")
	})
	require.EqualError(t, err, "permanent")
	require.Equal(t, 1, attempts)

	// A fresh backoff per call: a spent call does not shorten the next.
	policy := client.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond}
	for range 2 {
		_, attempts, err = client.Do(context.Background(), policy, func(context.Context) (int, error) {
			return 0, client.Retryable(errors.New("busy"), 0)
		})
		require.ErrorIs(t, err, client.ErrGaveUp)
		require.Equal(t, 3, attempts)
	}

	// A success after retries.
	n.Store(0)
	v, attempts, err := client.Do(context.Background(), policy, func(context.Context) (string, error) {
		if n.Add(1) < 3 {
			return "", client.Retryable(errors.New("busy"), 0)
		}
		return "ok", nil
	})
	require.NoError(t, err)
	require.Equal(t, "ok", v)
	require.Equal(t, 3, attempts)
}

// No wait passes the context's deadline: a Retry-After beyond it ends the
// call at once, not when the deadline comes (an hour away here: a call
// that waited would hold the test until its timeout).
func TestDoRespectsDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, attempts, err := client.Do(ctx, client.Retry{}, func(context.Context) (int, error) {
		return 0, client.Retryable(errors.New("busy"), 2*time.Hour)
	})
	require.ErrorIs(t, err, client.ErrGaveUp)
	require.Equal(t, 1, attempts)
	require.NoError(t, ctx.Err(), "returned before the deadline")
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3*time.Second, client.ParseRetryAfter("3"))
	require.Equal(t, 1500*time.Millisecond, client.ParseRetryAfter("1.5"))
	require.Zero(t, client.ParseRetryAfter(""))
	require.Zero(t, client.ParseRetryAfter("-1"))
	require.Zero(t, client.ParseRetryAfter("soon"))
	d := client.ParseRetryAfter(time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat))
	require.True(t, d > 8*time.Second && d <= 10*time.Second, d)
	require.True(t, strings.HasPrefix((&client.APIError{Status: 500, Message: "x"}).Error(), "client: HTTP 500"))
}
