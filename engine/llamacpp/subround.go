//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// runSubRoundSafe runs a sub-round, turning a panic into per-decision
// errors and a reset of the KV state so that the loop goes on.
func (e *Engine) runSubRoundSafe(sub []*group) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("llamacpp: panic in decode loop", "panic", p, "stack", string(debug.Stack()))
			for _, g := range sub {
				for _, it := range g.items {
					if !it.doneScore && it.err == nil {
						it.err = fmt.Errorf("llamacpp: internal error: %v", p)
					}
				}
			}
			e.resetKV()
		}
	}()
	e.runSubRound(sub)
}

// runSubRound scores the live decisions of the groups: each head is
// prefilled once (reusing cached prefixes), then every decision's tail is
// decoded in a branch of it. A failed try is retried once, from scratch
// on a clean KV memory, then one decision at a time, each alone on an
// empty memory, so that a failure stays with the decisions that cause
// it: what fits the context alone is scored.
func (e *Engine) runSubRound(sub []*group) {
	e.cache.newRound()
	now := time.Now()
	var heads [][]llama.Token
	var members [][]*item
	for _, g := range sub {
		var live []*item
		for _, it := range g.items {
			it.queued = now.Sub(it.job.enqueued)
			if e.checkCaller(it) {
				e.stats.submitted.Add(int64(len(it.head) + len(it.tail)))
				live = append(live, it)
			}
		}
		if len(live) > 0 {
			heads, members = append(heads, e.sharedHead(g.head, live)), append(members, live)
		}
	}
	if len(heads) == 0 {
		return
	}
	err := e.trySubRound(heads, members)
	if err == nil {
		return
	}
	slog.Warn("llamacpp: decode failed; retrying on a clean cache", "err", err)
	e.resetKV()
	resetAttempts(members)
	if err := e.trySubRound(heads, members); err == nil {
		return
	}
	e.resetKV()
	resetAttempts(members)
	for _, its := range members {
		for _, it := range its {
			e.resetKV() // alone on an empty cache: what fits alone is scored
			if err := e.trySubRound([][]llama.Token{it.head}, [][]*item{{it}}); err != nil {
				it.err = mapDecodeErr(err)
			}
		}
	}
	e.resetKV()
}

// sharedHead returns head extended by the tokens that every tail in its
// starts with — the template between the state and the question, say —
// and moves those tokens from the tails to the items' heads, so that they
// are decoded once for the group instead of once per decision, and a
// later decision reuses them from the prefix cache (as a prompt cache
// matching the longest common prefix does). Every tail keeps at least its
// last token, whose logits are read. A lone decision's head, and any head
// on a recurrent memory, grows only by what the prefix cache already
// holds: a lone question's text is not worth caching, and a recurrent
// memory's entries are reusable only whole, so a head grown by one
// request's questions would miss the next request's.
func (e *Engine) sharedHead(head []llama.Token, its []*item) []llama.Token {
	n := len(its[0].tail) - 1
	for _, it := range its[1:] {
		n = min(n, commonPrefix(its[0].tail, it.tail), len(it.tail)-1)
	}
	if n <= 0 {
		return head
	}
	grown := append(head[:len(head):len(head)], its[0].tail[:n]...) // a copy: items of other sub-rounds share head
	if len(its) == 1 || e.recurrent {
		_, cached := e.cache.longest(grown)
		if n = min(n, cached-len(head)); n <= 0 {
			return head
		}
		grown = grown[:len(head)+n]
	}
	for _, it := range its {
		it.head, it.tail = grown, it.tail[n:]
	}
	return grown
}

// mapDecodeErr is the error a decision gets when it cannot be decoded
// even alone: a full KV memory is engine.ErrContextFull.
func mapDecodeErr(err error) error {
	if errors.Is(err, llama.ErrNoKVSlot) {
		return fmt.Errorf("%w: %w", engine.ErrContextFull, err)
	}
	return err
}

// resetAttempts clears the progress of a failed try from every member,
// for a retry from scratch. An item's error stays: a caller that gave up
// stays given up.
func resetAttempts(members [][]*item) {
	for _, its := range members {
		for _, it := range its {
			it.attempt = attempt{}
		}
	}
}

// resetKV empties the KV memory and the prefix cache.
func (e *Engine) resetKV() {
	e.lctx.Clear()
	e.cache.forget()
	e.free = e.free[:0]
	for s := e.opts.PrefixCacheSlots; s < e.lctx.NSeqMax(); s++ {
		e.free = append(e.free, s)
	}
	e.batch.Clear()
}

// trySubRound is one try of a sub-round: it prefills each head once
// (reusing cached prefixes), then decodes every member's tail in a branch
// of its head, packing branches of all groups into shared batches. Work
// stops within one decode call of a caller giving up or the engine
// closing (see checkCaller).
func (e *Engine) trySubRound(heads [][]llama.Token, members [][]*item) error {
	e.cache.unpinAll()
	b := e.newBranches(members)
	p, err := e.prefill(heads, members, b)
	if err != nil {
		return err
	}
	if err := e.decodeBranches(b, p.headSeq, members); err != nil {
		return err
	}
	e.cache.unpinAll()
	if e.opts.NoPrefixCache {
		e.cache.dropAll()
	}
	e.cache.offloadAll()
	e.stats.hostBytes.Store(int64(e.cache.savedBytes()))
	e.stats.moveNs.Store(e.cache.moveNanos)
	return nil
}

// checkCaller checks that it is still to be scored and that its caller
// still waits for it: a caller that gave up (its context's cause) or an
// engine that is closing (engine.ErrClosed) becomes the item's error,
// which stops it. It reports whether the item is still to be scored.
func (e *Engine) checkCaller(it *item) bool {
	if it.err != nil || it.doneScore {
		return false
	}
	select {
	case <-e.quit:
		it.err = engine.ErrClosed
		return false
	default:
	}
	if it.ctx == nil {
		return true
	}
	if err := context.Cause(it.ctx); err != nil {
		it.err = err
		return false
	}
	return true
}

// checkCallers runs checkCaller on every one of its (so that every stop
// is recorded) and reports whether any is still to be scored.
func (e *Engine) checkCallers(its []*item) bool {
	live := false
	for _, it := range its {
		live = e.checkCaller(it) || live
	}
	return live
}

// decode runs the current batch and counts it.
func (e *Engine) decode() error {
	if e.beforeDecodeFunc != nil {
		if err := e.beforeDecodeFunc(); err != nil {
			return err
		}
	}
	t := time.Now()
	err := e.lctx.Decode(e.batch)
	took := time.Since(t)
	e.stats.decodeNs.Add(int64(took))
	slog.Debug("llamacpp: decode", "tokens", e.batch.Len(), "took", took, "err", err)
	e.stats.batches.Add(1)
	if err == nil {
		e.stats.evaluated.Add(int64(e.batch.Len()))
	}
	return err
}

// takeSeq takes a free branch sequence.
func (e *Engine) takeSeq() (int, bool) {
	if len(e.free) == 0 {
		return 0, false
	}
	s := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	return s, true
}

// release empties a branch sequence and returns it to the pool.
func (e *Engine) release(seq int) {
	_ = e.lctx.SeqRemove(seq, -1, -1) // whole-sequence removal cannot fail
	e.free = append(e.free, seq)
}
