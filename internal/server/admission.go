package server

import (
	"context"
	"sync/atomic"
)

// admission bounds the requests inside the server: at most limit are
// admitted (reading their body, waiting or scoring), and of those at most
// cap(slots) score at once. Entering never blocks: a full server sheds the
// request at once, so nothing queues without bound.
type admission struct {
	slots    chan struct{}
	admitted atomic.Int64
	limit    int64
}

func newAdmission(concurrent, queue int) *admission {
	return &admission{slots: make(chan struct{}, concurrent), limit: int64(concurrent + queue)}
}

// enter admits a request, or reports false when the server is full.
func (a *admission) enter() bool {
	if a.admitted.Add(1) > a.limit {
		a.admitted.Add(-1)
		return false
	}
	return true
}

// leave undoes enter.
func (a *admission) leave() { a.admitted.Add(-1) }

// acquire waits for a scoring slot.
func (a *admission) acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// release frees a scoring slot.
func (a *admission) release() { <-a.slots }

func (a *admission) inFlight() int { return len(a.slots) }

func (a *admission) waiting() int {
	return max(int(a.admitted.Load())-len(a.slots), 0)
}
