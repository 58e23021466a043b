package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackoffWaitsRetryAfter: the wait after an attempt is the server's
// Retry-After when it is longer than the backoff, and the backoff again
// after that; a wait that would pass MaxElapsed or the context's deadline
// ends the retries instead. The delays are what Next returns (go-retry
// sleeps exactly that), so no clock is read here.
func TestBackoffWaitsRetryAfter(t *testing.T) {
	r := Retry{MaxAttempts: 4, BaseDelay: time.Millisecond}.WithDefaults()
	b := newBackoff(context.Background(), r)

	b.wait = 2 * time.Second
	d, stop := b.Next()
	require.False(t, stop)
	require.Equal(t, 2*time.Second, d, "a longer Retry-After replaces the backoff")

	d, stop = b.Next()
	require.False(t, stop)
	require.Less(t, d, time.Second, "the Retry-After holds for one wait only")

	b.wait = time.Hour
	_, stop = b.Next()
	require.True(t, stop, "a wait past MaxElapsed gives up")

	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Minute))
	defer cancel()
	r.MaxElapsed = 24 * time.Hour
	b = newBackoff(ctx, r)
	b.wait = 2 * time.Minute
	_, stop = b.Next()
	require.True(t, stop, "a wait past the context's deadline gives up")
}
