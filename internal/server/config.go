package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/policy"
)

// Sentinel errors.
var (
	// ErrConfig: a Config field is invalid; the message names it.
	ErrConfig = errors.New("server: invalid config")
)

// DefaultAliases are the Jev model names that unmodified System One client
// code sends; they are accepted by default.
var DefaultAliases = []string{"jev-latest", "jev-preview", "jev-1.13.0", "default"}

// Defaults of Config.
const (
	DefaultMaxBodyBytes  = 6 << 20 // SageMaker's real-time payload limit
	DefaultTimeout       = 60 * time.Second
	DefaultMaxConcurrent = 8
	DefaultMaxQueue      = 64
	DefaultRetryAfter    = time.Second
)

// NoQueue is the Config.MaxQueue that lets no request wait for a scoring
// slot (0 means the default).
const NoQueue = -1

// Config configures a Server. The zero value of a field means its default,
// given at the end of the field's comment.
type Config struct {
	// Scorer scores decisions. Nil means the model is still loading: call
	// SetScorer when it is ready. Defaults to nil.
	Scorer engine.Scorer
	// Model identifies the model of Scorer; it is reported by /v1/models
	// and names System One answers. SetScorer replaces it. Defaults to empty.
	Model decision.ModelIdentity
	// ModelName is the name System One responses report in "model" and
	// /v1/models lists. Defaults to the model's Name, else its file's base
	// name without ".gguf", else "verdict".
	ModelName string
	// Aliases are extra model names a System One request may ask for (the
	// answer still reports ModelName). A nil slice means DefaultAliases; an
	// empty non-nil slice accepts none. Defaults to DefaultAliases.
	Aliases []string
	// Policy, when set, holds the policy in force: each request's decisions
	// go through the one policy flow (policy.Apply) of the policy current
	// when the request is scored. Defaults to none: results carry no
	// outcome.
	Policy *policy.Holder
	// APIKeys maps each accepted key to its tenant (may be ""); keys are
	// checked by the rules of package auth (Authorization: Bearer or
	// X-Api-Key; every route but /ping). When empty, no authentication is
	// done. Defaults to none.
	APIKeys map[string]string
	// Limits bound each parsed request. Defaults to decision.DefaultLimits().
	Limits decision.Limits
	// MaxBodyBytes bounds a request body; larger bodies get 413.
	// Defaults to 6 MiB.
	MaxBodyBytes int64
	// Timeout bounds each request from admission to answer; beyond it the
	// request gets 504. Defaults to 60 s.
	Timeout time.Duration
	// MaxConcurrent is how many requests may be scoring at once (the engine
	// batches across them). Defaults to 8.
	MaxConcurrent int
	// MaxQueue is how many more requests may wait for a scoring slot;
	// beyond MaxConcurrent+MaxQueue requests get 503 with Retry-After.
	// NoQueue lets none wait. Defaults to 64.
	MaxQueue int
	// RetryAfter is what 503 answers tell clients to wait (whole seconds,
	// at least 1). Defaults to 1 s.
	RetryAfter time.Duration
	// Registry receives the server's metrics and is what /metrics serves.
	// Defaults to a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Logger receives one line per request. Defaults to slog.Default().
	Logger *slog.Logger
	// LogState adds each request's body (with its state text) to the
	// request log at debug level. Defaults to false: logs never hold state.
	LogState bool
	// PolicyAdmin, when set, serves GET/POST /admin/policy (read or reload
	// the policy; policy.Holder.Handler) behind the same authentication as
	// every other route. Defaults to nil: no such route.
	PolicyAdmin http.Handler
	// ReleaseDate is the release_date GET /v1/models reports for the model
	// and its aliases (RFC 3339). Defaults to the time New was called.
	ReleaseDate string
	// RequestIDFunc makes the id of each request (x-typesafe-request-id).
	// Defaults to "req_" and 24 random hex digits.
	RequestIDFunc func() string
}

func (c Config) withDefaults() Config {
	if c.Aliases == nil {
		c.Aliases = DefaultAliases
	}
	c.Limits = withLimitDefaults(c.Limits)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	switch c.MaxQueue {
	case 0:
		c.MaxQueue = DefaultMaxQueue
	case NoQueue:
		c.MaxQueue = 0
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReleaseDate == "" {
		c.ReleaseDate = time.Now().UTC().Format(time.RFC3339)
	}
	if c.RequestIDFunc == nil {
		c.RequestIDFunc = newRequestID
	}
	return c
}

// modelName is the name to report for model m: Config.ModelName, else
// m.Name, else the file's base name without ".gguf", else "verdict".
func (c Config) modelName(m decision.ModelIdentity) string {
	switch {
	case c.ModelName != "":
		return c.ModelName
	case m.Name != "":
		return m.Name
	case m.File != "":
		base := m.File
		if i := strings.LastIndexAny(base, `/\`); i >= 0 {
			base = base[i+1:]
		}
		return strings.TrimSuffix(base, ".gguf")
	}
	return "verdict"
}

// withLimitDefaults fills the zero fields of l from decision.DefaultLimits.
func withLimitDefaults(l decision.Limits) decision.Limits {
	d := decision.DefaultLimits()
	def := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	def(&l.MaxStateBytes, d.MaxStateBytes)
	def(&l.MaxQuestionBytes, d.MaxQuestionBytes)
	def(&l.MinOptions, d.MinOptions)
	def(&l.MaxOptions, d.MaxOptions)
	def(&l.MaxOptionIDBytes, d.MaxOptionIDBytes)
	def(&l.MaxDescriptionBytes, d.MaxDescriptionBytes)
	def(&l.MaxIDBytes, d.MaxIDBytes)
	def(&l.MaxDecisions, d.MaxDecisions)
	def(&l.MaxMetadata, d.MaxMetadata)
	def(&l.MaxScoreLevels, d.MaxScoreLevels)
	return l
}

// validate names the first bad field.
func (c Config) validate() error {
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes must be > 0, got %d", ErrConfig, c.MaxBodyBytes)
	case c.Timeout < 0:
		return fmt.Errorf("%w: Timeout must be > 0, got %v", ErrConfig, c.Timeout)
	case c.MaxConcurrent < 0:
		return fmt.Errorf("%w: MaxConcurrent must be >= 1, got %d", ErrConfig, c.MaxConcurrent)
	case c.MaxQueue < NoQueue:
		return fmt.Errorf("%w: MaxQueue must be >= 0 (0 means the default, NoQueue none), got %d", ErrConfig, c.MaxQueue)
	case c.RetryAfter < 0:
		return fmt.Errorf("%w: RetryAfter must be > 0, got %v", ErrConfig, c.RetryAfter)
	}
	if _, err := auth.New(c.APIKeys, false); err != nil {
		return fmt.Errorf("%w: APIKeys: %w", ErrConfig, err)
	}
	for i, a := range c.Aliases {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("%w: Aliases[%d] is empty", ErrConfig, i)
		}
	}
	return nil
}
