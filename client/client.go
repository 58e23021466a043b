package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// StatusOverloaded is the System One "overloaded" status (retried).
const StatusOverloaded = 529

// APIError is a non-2xx answer, decoded from either error shape: System
// One ({"detail": {"error_type", "message"}}) or the SemIf adapter
// contract ({"error": …}), plus verdict's own members when present.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Type is detail.error_type (System One routes), else "".
	Type string
	// Code is verdict's code ("invalid", "overloaded", …), else "".
	Code string
	// Message is the best human message the body had.
	Message string
	// Fields are verdict's field problems, with their paths.
	Fields []decision.FieldError
	// Retryable is the body's "retryable" (SageMaker routes' 503).
	Retryable bool
	// RetryAfter is the Retry-After the server sent (0: none).
	RetryAfter time.Duration
	// RequestID is the x-typesafe-request-id header.
	RequestID string
	// Body is the raw body.
	Body []byte
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("client: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("client: HTTP %d", e.Status)
}

// ShouldRetry reports whether the status is worth another attempt: 408,
// 429, 529 and every 5xx. Other 4xx are the request's fault.
func (e *APIError) ShouldRetry() bool {
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

func decodeError(resp *http.Response, body []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, Body: body, RequestID: resp.Header.Get("x-typesafe-request-id"),
		RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"))}
	var b struct {
		Error     json.RawMessage `json:"error"`
		Retryable bool            `json:"retryable"`
		Detail    json.RawMessage `json:"detail"`
		Message   string          `json:"message"`
		Code      string          `json:"code"`
		Fields    []decision.FieldError
	}
	if json.Unmarshal(body, &b) != nil {
		e.Message = strings.TrimSpace(string(body))
		return e
	}
	// The message in the order the TypeSafe SDK reads it: "error", then
	// "message", then "detail".
	e.Code, e.Fields, e.Retryable = b.Code, b.Fields, b.Retryable
	var s string
	if json.Unmarshal(b.Error, &s) == nil && s != "" {
		e.Message = s
	} else {
		e.Message = b.Message
	}
	var d struct {
		ErrorType string `json:"error_type"`
		Message   string `json:"message"`
	}
	if json.Unmarshal(b.Detail, &d) == nil {
		e.Type = d.ErrorType
		if e.Message == "" {
			e.Message = d.Message
		}
	} else if json.Unmarshal(b.Detail, &s) == nil && e.Message == "" {
		e.Message = s
	}
	return e
}

// Client calls a verdict server (or any server of the same formats):
// System One (/v1/systemone, /v1/models) and the SageMaker contract
// (/invocations). It is safe for concurrent use.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:8080. Required.
	BaseURL string
	// APIKey is sent as Authorization: Bearer. Defaults to none.
	APIKey string
	// HTTPClient sends the requests. Defaults to http.DefaultClient.
	HTTPClient *http.Client
	// Retry is the retry policy of every call. Defaults to Retry{}'s defaults.
	Retry Retry
}

// Post sends one JSON body to path with retries and returns the 2xx body.
// A connection error, 408, 429, 529 and 5xx are retried honouring
// Retry-After; other answers return an *APIError at once.
func (c *Client) Post(ctx context.Context, path string, body []byte) ([]byte, error) {
	return c.do(ctx, http.MethodPost, path, body)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if c.BaseURL == "" {
		return nil, errors.New("client: BaseURL is required")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	url := strings.TrimRight(c.BaseURL, "/") + path
	out, _, err := Do(ctx, c.Retry, func(ctx context.Context) ([]byte, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, rd)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		if c.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.APIKey)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, Retryable(err, 0) // connection refused, reset…
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, Retryable(err, 0)
		}
		if resp.StatusCode/100 == 2 {
			return b, nil
		}
		e := decodeError(resp, b)
		if e.ShouldRetry() {
			return nil, Retryable(e, e.RetryAfter)
		}
		return nil, e
	})
	return out, err
}

// Models lists the models a System One server answers with.
func (c *Client) Models(ctx context.Context) ([]ModelCard, error) {
	b, err := c.do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return nil, err
	}
	var m struct {
		Models []ModelCard `json:"models"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Models == nil {
		return nil, fmt.Errorf("client: GET /v1/models: not {\"models\": […]}: %.200s", b)
	}
	return m.Models, nil
}

// ModelCard is one entry of GET /v1/models.
type ModelCard struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	ReleaseDate string `json:"release_date"`
	AliasFor    string `json:"alias_for,omitempty"`
}

// SystemOne posts a System One request (any JSON-marshalable value, or
// json.RawMessage) to /v1/systemone.
func (c *Client) SystemOne(ctx context.Context, req any) (*SystemOneResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("client: encoding the request: %w", err)
	}
	b, err := c.Post(ctx, "/v1/systemone", body)
	if err != nil {
		return nil, err
	}
	var r SystemOneResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("client: decoding the answer: %w", err)
	}
	return &r, nil
}

// SystemOneResponse is a System One answer.
type SystemOneResponse struct {
	Model   string                     `json:"model"`
	Answers map[string]SystemOneAnswer `json:"answers"`
	Usage   decision.SystemOneUsage    `json:"usage"`
}

// SystemOneAnswer is one answer: the fields its type carries are set.
type SystemOneAnswer struct {
	Type          string             `json:"type"`
	Noul          *float64           `json:"noul,omitempty"`
	Choice        string             `json:"choice,omitempty"`
	Score         *float64           `json:"score,omitempty"`
	Legend        map[string]any     `json:"legend,omitempty"`
	Probabilities map[string]float64 `json:"probabilities,omitempty"`
	Confidence    *float64           `json:"confidence,omitempty"`
}

// Score sends decisions as one SemIf batch to /invocations and returns
// their results in order, and the batch's timing block.
func (c *Client) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, json.RawMessage, error) {
	body, err := json.Marshal(struct {
		Decisions []decision.Decision `json:"decisions"`
	}{ds})
	if err != nil {
		return nil, nil, fmt.Errorf("client: encoding the batch: %w", err)
	}
	b, err := c.Post(ctx, "/invocations", body)
	if err != nil {
		return nil, nil, err
	}
	var r struct {
		Results []decision.Result `json:"results"`
		Timing  json.RawMessage   `json:"timing"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, nil, fmt.Errorf("client: decoding the batch answer: %w", err)
	}
	if len(r.Results) != len(ds) {
		return nil, nil, fmt.Errorf("client: %d results for %d decisions", len(r.Results), len(ds))
	}
	return r.Results, r.Timing, nil
}
