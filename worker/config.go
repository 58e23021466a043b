package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/queue"
	"github.com/verdict-dev/verdict/sink"
)

// Scorer is what the worker needs of an engine (engine.Scorer and
// engine/llamacpp.Engine satisfy it): one result per decision, in order;
// per-decision failures in Result.Error, whole-call failures (engine.ErrBusy,
// …) as the error.
type Scorer interface {
	Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error)
}

// ErrConfig: a worker configuration field is invalid.
var ErrConfig = errors.New("worker: invalid configuration")

// Defaults.
const (
	DefaultConcurrency     = 2
	DefaultVisibility      = 60 * time.Second
	DefaultWait            = 20 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultRetryBase       = 2 * time.Second
	DefaultRetryMax        = 5 * time.Minute
)

// Config configures a Worker. The zero value of a field means its default,
// given in the field's comment.
type Config struct {
	// Queue is the queue to consume. Required.
	Queue queue.Queue
	// Scorer scores decisions. Required.
	Scorer Scorer
	// Sinks receive every record. At least one is required.
	Sinks []sink.Sink
	// Webhook posts records to the reply URLs that requests name. Defaults
	// to none: reply targets are ignored (and counted).
	Webhook *sink.Webhook
	// Policy holds the policy in force. Defaults to policy.Default().
	Policy *policy.Holder
	// Concurrency is the number of received batches processed at once.
	// Defaults to 2.
	Concurrency int
	// MaxMessages is the most messages one receive takes, 1..10. The
	// worker takes fewer when its measured processing time says more would
	// not finish within the visibility timeout. Defaults to 10.
	MaxMessages int
	// Visibility is the visibility timeout the worker receives with and
	// extends to. Defaults to 60 s.
	Visibility time.Duration
	// Heartbeat is how often held messages are extended. Defaults to a
	// third of Visibility.
	Heartbeat time.Duration
	// Wait is the long-poll time of a receive, at most 20 s. Defaults to
	// 20 s.
	Wait time.Duration
	// ShutdownTimeout bounds the graceful stop that follows the
	// cancellation of Run's context. Defaults to 30 s.
	ShutdownTimeout time.Duration
	// RetryBase is the release delay after a first failed receive; it
	// doubles with each further receive up to RetryMax. A negative value
	// releases at once. Defaults to 2 s.
	RetryBase time.Duration
	// RetryMax caps the release delay. Defaults to 5 min.
	RetryMax time.Duration
	// PublishTiming keeps the per-run timing in published results. Off by
	// default so that a redelivery publishes identical bytes (timing is in
	// the metrics). Defaults to false.
	PublishTiming bool
	// LogState lets debug logs include state text. Defaults to false.
	LogState bool
	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the worker's metrics. Defaults to a new registry
	// (see Worker.Registry).
	Registry *prometheus.Registry
	// PrefixStatsFunc, when set, reports the engine's cumulative prefix
	// cache hits and misses for the metrics. Defaults to none.
	PrefixStatsFunc func() (hits, misses int64)
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Policy == nil {
		c.Policy = policy.HolderOf(policy.Default())
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = queue.MaxBatch
	}
	def(&c.Visibility, DefaultVisibility)
	def(&c.Heartbeat, c.Visibility/3)
	def(&c.Wait, DefaultWait)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	def(&c.RetryBase, DefaultRetryBase)
	def(&c.RetryMax, DefaultRetryMax)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return c
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.Queue == nil:
		return bad("Config.Queue is required")
	case c.Scorer == nil:
		return bad("Config.Scorer is required")
	case len(c.Sinks) == 0:
		return bad("Config.Sinks needs at least one sink")
	case c.Concurrency < 1:
		return bad("Config.Concurrency must be >= 1, got %d", c.Concurrency)
	case c.MaxMessages < 1 || c.MaxMessages > queue.MaxBatch:
		return bad("Config.MaxMessages must be 1..10, got %d", c.MaxMessages)
	case c.Visibility < time.Second || c.Visibility > queue.MaxVisibility:
		return bad("Config.Visibility must be 1s..12h, got %v", c.Visibility)
	case c.Heartbeat <= 0 || c.Heartbeat >= c.Visibility:
		return bad("Config.Heartbeat must be > 0 and shorter than Visibility (%v), got %v", c.Visibility, c.Heartbeat)
	case c.Wait < 0 || c.Wait > queue.MaxWait:
		return bad("Config.Wait must be 0..20s, got %v", c.Wait)
	case c.ShutdownTimeout < 0:
		return bad("Config.ShutdownTimeout must be >= 0, got %v", c.ShutdownTimeout)
	case c.RetryMax < 0 || c.RetryMax > queue.MaxVisibility:
		return bad("Config.RetryMax must be 0..12h, got %v", c.RetryMax)
	}
	for i, s := range c.Sinks {
		if s == nil {
			return bad("Config.Sinks[%d] is nil", i)
		}
	}
	return nil
}
