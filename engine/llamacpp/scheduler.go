//go:build cgo

package llamacpp

import (
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// loop is the decode loop: the only goroutine that touches the context.
// It schedules continuously: waiting decisions are grouped by state
// prefix in arrival order (FIFO), each pass takes the oldest groups as one
// sub-round, and between sub-rounds it admits what arrived meanwhile. A
// job is answered as soon as its own decisions are done, so no request
// waits for work that arrived with or after it, beyond the sub-round it
// shares.
func (e *Engine) loop() {
	defer close(e.done)
	w := &waiting{byHead: map[string]*group{}}
	for {
		if len(w.groups) == 0 {
			select {
			case <-e.quit:
				e.drainClosed(w)
				return
			case j := <-e.jobs:
				e.admit(w, j)
			}
		}
	more:
		for w.decisions < e.opts.MaxRoundDecisions {
			select {
			case j := <-e.jobs:
				e.admit(w, j)
			default:
				break more
			}
		}
		select {
		case <-e.quit:
			e.drainClosed(w)
			return
		default:
		}
		if len(w.groups) == 0 {
			continue
		}
		sub := w.take(e.opts.PrefixCacheSlots, e.opts.HeadBatchTokens, e.cache.uncached)
		e.runSubRoundSafe(sub)
		for _, g := range sub {
			for _, it := range g.items {
				if it.doneScore {
					e.stats.decisions.Add(1)
				} else if it.err == nil {
					it.err = fmt.Errorf("llamacpp: internal error: decision left unscored")
				}
				e.finishItem(it)
			}
		}
	}
}

// group is the waiting decisions that share one state prefix.
type group struct {
	key   string
	head  []llama.Token
	items []*item
}

// waiting is the decode loop's queue: groups in the order their first
// decision arrived. A decision arriving for a state that already waits
// joins its group, so the state is prefilled once.
type waiting struct {
	groups    []*group
	byHead    map[string]*group
	decisions int
}

// admit takes a job into the queue; its decisions that cannot be scored
// (refused while preparing) are finished at once.
func (e *Engine) admit(w *waiting, j *job) {
	j.left = len(j.items)
	for _, it := range j.items {
		it.job, it.ctx = j, j.ctx
		if it.err != nil {
			e.finishItem(it)
			continue
		}
		k := tokenKey(it.head)
		g, ok := w.byHead[k]
		if !ok {
			g = &group{key: k, head: it.head}
			w.byHead[k] = g
			w.groups = append(w.groups, g)
		}
		g.items = append(g.items, it)
		w.decisions++
	}
}

// take removes the next sub-round from the front of the queue, in order:
// at most slots groups (the prefix-cache slots), whose heads' new tokens
// (what newTokens says the cache does not hold) together stay within
// tokens, except that the first group with new tokens is taken whatever
// its length, so that the cells every decode attends over stay few. A
// cached head adds no new tokens, so questions on cached states ride
// along with a fresh state's prefill, before or after it in the queue;
// the first fresh head that does not fit ends the sub-round.
func (w *waiting) take(slots, tokens int, newTokens func([]llama.Token) int) []*group {
	n, sum := 0, 0 // sum > 0 once a fresh head is taken
	for n < len(w.groups) && n < slots {
		cost := newTokens(w.groups[n].head)
		if cost > 0 && sum > 0 && sum+cost > tokens {
			break
		}
		sum += cost
		n++
	}
	sub := w.groups[:n:n]
	w.groups = w.groups[n:]
	for _, g := range sub {
		delete(w.byHead, g.key)
		w.decisions -= len(g.items)
	}
	return sub
}

// finishItem counts an item done; the last of its job answers the caller
// and releases the job's admission. The loop does not touch the item
// after that.
func (e *Engine) finishItem(it *item) {
	j := it.job
	j.left--
	if j.left == 0 {
		e.pending.Add(-int64(len(j.items)))
		if e.jobDoneFunc != nil {
			e.jobDoneFunc(j)
		}
		close(j.done)
	}
}

// drainClosed answers everything waiting, queued or not yet admitted,
// with engine.ErrClosed.
func (e *Engine) drainClosed(w *waiting) {
	closeAll := func(its []*item) {
		for _, it := range its {
			if it.err == nil && !it.doneScore {
				it.err = engine.ErrClosed
			}
			e.finishItem(it)
		}
	}
	for _, g := range w.groups {
		closeAll(g.items)
	}
	w.groups, w.byHead, w.decisions = nil, map[string]*group{}, 0
	for {
		select {
		case j := <-e.jobs:
			j.left = len(j.items)
			for _, it := range j.items {
				it.job = j
			}
			closeAll(j.items)
		default:
			return
		}
	}
}

func tokenKey(ts []llama.Token) string {
	var b strings.Builder
	b.Grow(len(ts) * 4)
	for _, t := range ts {
		b.WriteByte(byte(t))
		b.WriteByte(byte(t >> 8))
		b.WriteByte(byte(t >> 16))
		b.WriteByte(byte(t >> 24))
	}
	return b.String()
}
