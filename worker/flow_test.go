package worker

import (
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/queue"
)

// A fresh worker takes one message: it has no timing to tell what fits in
// the visibility timeout, and it publishes nothing until its first batch is
// scored. Timings then let it take more, as many as finish within half the
// visibility timeout; a redelivered message makes it cautious again.
func TestReceiveMaxStartsSmallAndFitsVisibility(t *testing.T) {
	t.Parallel()
	f := newFlow(Config{Concurrency: 2, MaxMessages: 10, Visibility: 60 * time.Second})
	if n := f.receiveMax(); n != 1 {
		t.Fatalf("before any measurement: %d, want 1", n)
	}
	f.observe(10*time.Millisecond, 1, false)
	if n := f.receiveMax(); n != 10 {
		t.Fatalf("after a quick message: %d, want 10", n)
	}
	// 4 messages took 40 s: 10 s each, so only 3 fit in half of 60 s.
	f.perMessage = 0
	f.observe(40*time.Second, 4, false)
	if n := f.receiveMax(); n != 3 {
		t.Fatalf("after slow batch: %d, want 3", n)
	}
	// Very slow: still one at a time, never zero.
	f.perMessage = 10 * time.Minute
	if n := f.receiveMax(); n != 1 {
		t.Fatalf("very slow: %d, want 1", n)
	}
	// A redelivered message: one at a time until a receive without one.
	f.perMessage = time.Millisecond
	f.noteReceived([]queue.Message{{ReceiveCount: 1}, {ReceiveCount: 2}})
	if n := f.receiveMax(); n != 1 {
		t.Fatalf("after a redelivered message: %d, want 1", n)
	}
	f.observe(time.Millisecond, 1, true)
	if n := f.receiveMax(); n != 1 {
		t.Fatalf("still redelivered: %d, want 1", n)
	}
	f.observe(time.Millisecond, 1, false)
	if n := f.receiveMax(); n != 10 {
		t.Fatalf("after a fresh receive: %d, want 10", n)
	}
}

// A cautious worker has one slot; a measured one has Concurrency of them;
// a freed slot wakes a waiting taker, and a stop wakes it with false.
func TestTakeSlotFollowsCaution(t *testing.T) {
	t.Parallel()
	f := newFlow(Config{Concurrency: 2, MaxMessages: 10, Visibility: 60 * time.Second})
	done := make(chan struct{})
	if !f.takeSlot(done) {
		t.Fatal("a fresh worker has one slot")
	}
	took := make(chan bool, 1)
	go func() { took <- f.takeSlot(done) }()
	f.observe(time.Millisecond, 1, false) // measured: two slots from now on
	f.freeSlot()                          // wakes the waiting taker
	if !<-took {
		t.Fatal("the waiting taker did not get the freed slot")
	}
	if !f.takeSlot(done) {
		t.Fatal("a measured worker has Concurrency slots")
	}
	go func() { took <- f.takeSlot(done) }()
	close(done)
	if <-took {
		t.Fatal("a taker got a third slot, or was not woken by the stop")
	}
}
