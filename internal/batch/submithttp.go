package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/client"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/results"
)

// frontDoor calls the front door's HTTP API: POST /v1/decisions and GET
// /v1/requests/{id}. Every attempt has its own deadline; connection
// errors, 408, 429 and 5xx are retried by client.Do, honouring
// Retry-After; other answers come back as a *client.APIError.
type frontDoor struct {
	base      string
	apiKey    string
	hc        *http.Client
	retry     client.Retry
	timeout   time.Duration
	retryFunc func(call string, status int, after time.Duration, err error)
}

// accepted is the part of the 202 answer Submit reads.
type accepted struct {
	RequestID   string   `json:"request_id"`
	DecisionIDs []string `json:"decision_ids"`
}

// post sends one chunk.
func (f *frontDoor) post(ctx context.Context, body []byte, key string) (accepted, error) {
	var a accepted
	b, err := f.call(ctx, http.MethodPost, "/v1/decisions", body, key)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(b, &a); err != nil || a.RequestID == "" {
		return a, fmt.Errorf("batch: the front door's 202 answer has no request_id: %.200s", b)
	}
	return a, nil
}

// request looks up one request's status.
func (f *frontDoor) request(ctx context.Context, id string) (results.Request, error) {
	var r results.Request
	b, err := f.call(ctx, http.MethodGet, "/v1/requests/"+url.PathEscape(id), nil, "")
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("batch: GET /v1/requests/%s: bad answer: %w", id, err)
	}
	return r, nil
}

func (f *frontDoor) call(ctx context.Context, method, path string, body []byte, key string) ([]byte, error) {
	what := method + " " + path
	b, _, err := client.Do(ctx, f.retry, func(ctx context.Context) ([]byte, error) {
		actx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(actx, method, f.base+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		if f.apiKey != "" {
			req.Header.Set("X-Api-Key", f.apiKey)
		}
		req.Header.Set("User-Agent", "verdict-batch")
		resp, err := f.hc.Do(req)
		if err == nil {
			defer resp.Body.Close()
			var rb []byte
			if rb, err = io.ReadAll(io.LimitReader(resp.Body, 256<<20)); err == nil {
				if resp.StatusCode/100 == 2 {
					return rb, nil
				}
				ae := apiError(resp, rb)
				if !ae.ShouldRetry() {
					return nil, ae
				}
				f.notify(what, ae.Status, ae.RetryAfter, ae)
				return nil, client.Retryable(ae, ae.RetryAfter)
			}
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		err = fmt.Errorf("batch: %s: %w", what, err) // a connection error or a missed deadline
		f.notify(what, 0, 0, err)
		return nil, client.Retryable(err, 0)
	})
	return b, err
}

func (f *frontDoor) notify(what string, status int, after time.Duration, err error) {
	if f.retryFunc != nil {
		f.retryFunc(what, status, after, err)
	}
}

// apiError decodes the front door's error body ({"message", "code",
// "fields", "request_id"}).
func apiError(resp *http.Response, body []byte) *client.APIError {
	e := &client.APIError{Status: resp.StatusCode, Body: body, RetryAfter: client.ParseRetryAfter(resp.Header.Get("Retry-After"))}
	var eb decision.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Message != "" {
		e.Code, e.Message, e.Fields, e.RequestID = string(eb.Code), eb.Message, eb.Fields, eb.RequestID
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
	}
	return e
}

// refused reports whether err is the front door refusing the caller (401,
// 403): the whole run stops.
func refused(err error) (*client.APIError, bool) {
	var ae *client.APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden) {
		return ae, true
	}
	return nil, false
}

// chunkError turns a 4xx answer that is about the chunk's content (400,
// 413, 422) into the error each of its decisions gets; ok is false for
// other answers.
func chunkError(err error) (*client.APIError, bool) {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return nil, false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return ae, true
	}
	return nil, false
}
