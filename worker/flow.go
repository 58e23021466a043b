package worker

import (
	"sync"
	"time"

	"github.com/verdict-dev/verdict/internal/queue"
)

// flow decides how much the worker takes: how many receives it processes
// at once (each holds a slot until its messages are acted on) and how
// many messages the next receive asks for.
//
// The worker is cautious — one slot, one message a receive — while it has
// measured nothing (a fresh worker cannot know what fits in the visibility
// timeout, and after a crash it is what a restarted worker sees first) and
// after a receive that held a message delivered before: when a message
// crashes workers, it then crashes one holding nothing else, instead of
// taking the messages received with it toward the dead-letter queue.
type flow struct {
	concurrency int           // Config.Concurrency
	maxMessages int           // Config.MaxMessages
	visibility  time.Duration // Config.Visibility

	mu          sync.Mutex
	busy        int           // slots taken
	freed       chan struct{} // closed and replaced when a slot is freed
	perMessage  time.Duration // moving average of processing time per message; 0: none measured
	redelivered bool          // the last receive held a message delivered before
}

func newFlow(cfg Config) *flow {
	return &flow{concurrency: cfg.Concurrency, maxMessages: cfg.MaxMessages, visibility: cfg.Visibility, freed: make(chan struct{})}
}

// takeSlot waits for a free slot: Concurrency of them, or one while the
// worker is cautious. It reports false when done is closed first.
func (f *flow) takeSlot(done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		limit := f.concurrency
		if f.cautiousLocked() {
			limit = 1
		}
		if f.busy < limit {
			f.busy++
			f.mu.Unlock()
			return true
		}
		freed := f.freed
		f.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			return false
		}
	}
}

// freeSlot gives back a slot that takeSlot took.
func (f *flow) freeSlot() {
	f.mu.Lock()
	f.busy--
	close(f.freed)
	f.freed = make(chan struct{})
	f.mu.Unlock()
}

// cautiousLocked reports whether the worker is cautious (see flow).
// Callers hold f.mu.
func (f *flow) cautiousLocked() bool { return f.perMessage == 0 || f.redelivered }

// receiveMax is how many messages to take now: at most MaxMessages, one
// while the worker is cautious, and no more than the measured processing
// time says will finish within half the visibility timeout.
func (f *flow) receiveMax() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cautiousLocked() {
		return 1
	}
	n := int((f.visibility / 2) / f.perMessage)
	return max(1, min(n, f.maxMessages))
}

// noteReceived makes the worker cautious when a receive holds a message
// delivered before.
func (f *flow) noteReceived(msgs []queue.Message) {
	for _, m := range msgs {
		if redelivered(m) {
			f.mu.Lock()
			f.redelivered = true
			f.mu.Unlock()
			return
		}
	}
}

// observe records the processing time of a receive's n messages; a
// receive without redelivered messages ends the caution they caused.
func (f *flow) observe(d time.Duration, n int, hadRedelivered bool) {
	if n == 0 {
		return
	}
	per := max(d/time.Duration(n), time.Nanosecond)
	f.mu.Lock()
	if f.perMessage == 0 {
		f.perMessage = per
	} else {
		f.perMessage = (f.perMessage*7 + per) / 8
	}
	if !hadRedelivered {
		f.redelivered = false
	}
	f.mu.Unlock()
}

// redelivered reports whether a message's receive count says it was
// received before: by a worker that crashed or was stopped, or whose
// visibility ended, or that released it after a failure.
func redelivered(m queue.Message) bool { return m.ReceiveCount > 1 }
