package queuetest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to, for
// queue.LocalConfig.NowFunc: a test lets a visibility timeout or a release
// delay pass with Advance instead of sleeping through it, and can then
// check that nothing happened before it without waiting and hoping.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads the current time until advanced.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now is the clock's time (give it as NowFunc).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
