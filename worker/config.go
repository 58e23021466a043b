package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/policy"
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
	// DefaultMessageTimeoutFactor: a message's processing is abandoned
	// after this many visibility timeouts (Config.MessageTimeout).
	DefaultMessageTimeoutFactor = 5
)

// None, given to a duration field whose comment says so, asks for no time
// at all: the zero value of a field means its default, so zero itself is
// spelled None (river's -1 convention). Other negative values are refused.
const None time.Duration = -1

// Config configures a Worker. The zero value of a field means its default,
// given in the field's comment; a field that may be zero on purpose says
// how to ask for it (None).
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
	// Pool is the pool this worker serves (decision.RouteCPU or
	// decision.RouteGPU), the stage of a cascade its policy evaluates.
	// Defaults to the pool each message was sent to (its envelope's
	// Route).
	Pool decision.Route
	// Escalate holds the queues of the pools this worker sends decisions
	// on to when a policy kind's escalate clause says so (a small model
	// here, a bigger one there). An escalation to a pool without a queue
	// here gets the kind's fallback. Its own pool may not be among them.
	// Defaults to none.
	Escalate map[decision.Route]queue.Sender
	// Concurrency is the most receives (the messages of one receive call)
	// processed at once, 1 or more. A worker that has measured nothing
	// yet, or has just received a message that was delivered before (see
	// MaxMessages), processes one receive at a time. Defaults to 2.
	Concurrency int
	// MaxMessages is the most messages one receive takes, 1..10. The
	// worker takes fewer when its measured processing time says more would
	// not finish within half the visibility timeout, and one at a time
	// while it has measured nothing yet or after receiving a message whose
	// receive count says it was in flight before (a crash, an expired
	// visibility). Defaults to 10.
	MaxMessages int
	// Visibility is the visibility timeout the worker receives with and
	// extends to, 1s..12h. Defaults to 60 s.
	Visibility time.Duration
	// Heartbeat is how often held messages are extended; shorter than
	// Visibility. Defaults to a third of Visibility.
	Heartbeat time.Duration
	// MessageTimeout bounds the work on one received message (scoring and
	// publishing), heartbeat or not: when it passes, the calls still
	// running are abandoned and the message is released with the retry
	// delay, so a call that never returns cannot hold it forever. At most
	// 12h. Defaults to DefaultMessageTimeoutFactor × Visibility.
	MessageTimeout time.Duration
	// Wait is the long-poll time of a receive, at most 20 s; None returns
	// at once. Defaults to 20 s.
	Wait time.Duration
	// ShutdownTimeout bounds the stop that follows the cancellation of
	// Run's context, releases included; None releases at once. Defaults to
	// 30 s.
	ShutdownTimeout time.Duration
	// RetryBase is the release delay after a first failed receive; it
	// doubles with each further receive up to RetryMax. None releases at
	// once. Defaults to 2 s.
	RetryBase time.Duration
	// RetryMax caps the release delay, at most 12h; None releases at once.
	// Defaults to 5 min.
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

// FieldError names the Config field that is invalid. It matches ErrConfig
// with errors.Is.
type FieldError struct {
	// Field is the field's name, e.g. "Wait".
	Field string
	// Problem says what is wrong, with the value.
	Problem string
}

func (e *FieldError) Error() string {
	return ErrConfig.Error() + ": Config." + e.Field + ": " + e.Problem
}

// Is makes errors.Is(err, ErrConfig) true.
func (e *FieldError) Is(target error) bool { return target == ErrConfig }

// FieldProblem is the field and what is wrong with it, for callers that
// name the field their own way (a command names its flag).
func (e *FieldError) FieldProblem() (field, problem string) { return e.Field, e.Problem }

func bad(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// CheckSettings validates the numeric and timing fields as given (before
// defaults), leaving out the components (Queue, Scorer, Sinks). New runs
// it too; a command calls it to refuse bad flags before it opens
// anything.
func (c Config) CheckSettings() error {
	// durations whose zero is "default" and None is zero; range is the
	// largest value allowed.
	noneOK := func(field string, v, most time.Duration) error {
		if v < 0 && v != None {
			return bad(field, "must be 0 (default), None (-1) or positive, got %v", v)
		}
		if v > most {
			return bad(field, "must be at most %v, got %v", most, v)
		}
		return nil
	}
	switch {
	case c.Concurrency < 0:
		return bad("Concurrency", "must be >= 1, got %d", c.Concurrency)
	case c.MaxMessages < 0 || c.MaxMessages > queue.MaxBatch:
		return bad("MaxMessages", "must be 1..10, got %d", c.MaxMessages)
	case c.Visibility != 0 && (c.Visibility < time.Second || c.Visibility > queue.MaxVisibility):
		return bad("Visibility", "must be 1s..12h, got %v", c.Visibility)
	case c.Heartbeat < 0:
		return bad("Heartbeat", "must be > 0, got %v", c.Heartbeat)
	case c.MessageTimeout < 0 || c.MessageTimeout > queue.MaxVisibility:
		return bad("MessageTimeout", "must be > 0 and at most 12h, got %v", c.MessageTimeout)
	}
	if err := noneOK("Wait", c.Wait, queue.MaxWait); err != nil {
		return err
	}
	if err := noneOK("ShutdownTimeout", c.ShutdownTimeout, queue.MaxVisibility); err != nil {
		return err
	}
	if err := noneOK("RetryBase", c.RetryBase, queue.MaxVisibility); err != nil {
		return err
	}
	if err := noneOK("RetryMax", c.RetryMax, queue.MaxVisibility); err != nil {
		return err
	}
	// Cross-field rules, on the values the defaults will give.
	d := c.withDefaults()
	if d.Heartbeat >= d.Visibility {
		return bad("Heartbeat", "must be shorter than Visibility (%v), got %v", d.Visibility, d.Heartbeat)
	}
	return nil
}

// withDefaults fills the fields left zero and turns None into 0. It runs
// after CheckSettings.
func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		switch *v {
		case 0:
			*v = d
		case None:
			*v = 0
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
	def(&c.MessageTimeout, min(DefaultMessageTimeoutFactor*c.Visibility, queue.MaxVisibility))
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

// validate checks the whole configuration as given.
func (c Config) validate() error {
	switch {
	case c.Queue == nil:
		return bad("Queue", "is required")
	case c.Scorer == nil:
		return bad("Scorer", "is required")
	case len(c.Sinks) == 0:
		return bad("Sinks", "needs at least one sink")
	}
	for i, s := range c.Sinks {
		if s == nil {
			return bad(fmt.Sprintf("Sinks[%d]", i), "is nil")
		}
	}
	if c.Pool != decision.RouteAuto && !c.Pool.IsPool() {
		return bad("Pool", "must be %q, %q or empty, got %q", decision.RouteCPU, decision.RouteGPU, c.Pool)
	}
	for p, q := range c.Escalate {
		f := fmt.Sprintf("Escalate[%q]", p)
		switch {
		case !p.IsPool():
			return bad(f, "is not a pool (want %q or %q)", decision.RouteCPU, decision.RouteGPU)
		case p == c.Pool:
			return bad(f, "is the worker's own pool: a decision never escalates to the pool it is on")
		case q == nil:
			return bad(f, "is nil")
		}
	}
	return c.CheckSettings()
}
