package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-retry"
)

// ErrGaveUp wraps the last error of a call whose retries ran out (attempts,
// MaxElapsed or the context's deadline).
var ErrGaveUp = errors.New("client: gave up retrying")

// Retry is a retry policy. The zero value of a field means its default,
// given at the end of the field's comment.
type Retry struct {
	// MaxAttempts bounds the attempts of one call, the first included.
	// Defaults to 5.
	MaxAttempts int
	// BaseDelay is the first backoff; each retry doubles it, with ±20 %
	// jitter. Defaults to 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps one exponential backoff wait. Defaults to 5 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps how long a Retry-After is honoured. Defaults to 30 s.
	MaxRetryAfter time.Duration
	// MaxElapsed bounds the time one call may spend: no retry starts whose
	// wait would end later. Defaults to 30 s.
	MaxElapsed time.Duration
}

// WithDefaults returns r with every zero field set to its default.
func (r Retry) WithDefaults() Retry {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 5
	}
	def(&r.BaseDelay, 100*time.Millisecond)
	def(&r.MaxDelay, 5*time.Second)
	def(&r.MaxRetryAfter, 30*time.Second)
	def(&r.MaxElapsed, 30*time.Second)
	return r
}

// retryable marks an error as worth another attempt, with the wait the
// server asked for.
type retryable struct {
	err   error
	after time.Duration
}

func (e *retryable) Error() string { return e.err.Error() }
func (e *retryable) Unwrap() error { return e.err }

// Retryable marks err as retryable; after is the server's Retry-After (0:
// none). Do retries only errors marked so.
func Retryable(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryable{err: err, after: after}
}

// Do calls fn until it succeeds, returns an error not marked Retryable, or
// the policy runs out. The backoff is built fresh for every call (backoffs
// are stateful); a longer Retry-After is waited instead of the backoff; no
// wait may pass MaxElapsed or the context's deadline. It returns the
// number of attempts made. When retries run out the error wraps ErrGaveUp
// and the last error.
func Do[T any](ctx context.Context, r Retry, fn func(ctx context.Context) (T, error)) (T, int, error) {
	r = r.WithDefaults()
	b := newBackoff(ctx, r)
	attempts := 0
	var last error
	out, err := retry.DoValue(ctx, b, func(ctx context.Context) (T, error) {
		attempts++
		v, err := fn(ctx)
		if err == nil {
			return v, nil
		}
		var re *retryable
		if !errors.As(err, &re) {
			return v, err
		}
		if ctx.Err() != nil {
			return v, context.Cause(ctx)
		}
		last = re.err
		b.wait = min(re.after, r.MaxRetryAfter)
		return v, retry.RetryableError(re.err)
	})
	if err != nil && last != nil && errors.Is(err, last) {
		return out, attempts, fmt.Errorf("%w after %d attempts: %w", ErrGaveUp, attempts, last)
	}
	return out, attempts, err
}

// backoff is exponential with jitter and caps, waits longer when the
// server asked for it, and stops before passing the budget.
type backoff struct {
	inner    retry.Backoff
	start    time.Time
	deadline time.Time // zero when the context has none
	elapsed  time.Duration
	wait     time.Duration // Retry-After of the last attempt
}

func newBackoff(ctx context.Context, r Retry) *backoff {
	b := retry.NewExponential(max(r.BaseDelay, time.Millisecond))
	b = retry.WithCappedDuration(r.MaxDelay, b)
	b = retry.WithJitterPercent(20, b)
	b = retry.WithMaxRetries(uint64(max(r.MaxAttempts-1, 0)), b)
	bo := &backoff{inner: b, start: time.Now(), elapsed: r.MaxElapsed}
	if d, ok := ctx.Deadline(); ok {
		bo.deadline = d
	}
	return bo
}

// Next implements retry.Backoff.
func (b *backoff) Next() (time.Duration, bool) {
	d, stop := b.inner.Next()
	if stop {
		return 0, true
	}
	d = max(d, b.wait)
	b.wait = 0
	end := time.Now().Add(d)
	if end.Sub(b.start) > b.elapsed || (!b.deadline.IsZero() && end.After(b.deadline)) {
		return 0, true // the wait would pass the budget: give up now
	}
	return d, false
}

// ParseRetryAfter reads a Retry-After header: delay seconds (integer or
// decimal) or an HTTP date; 0 when absent or unreadable.
func ParseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if sec, err := strconv.ParseFloat(v, 64); err == nil {
		if sec <= 0 || sec > 86400 {
			return 0
		}
		return time.Duration(sec * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
