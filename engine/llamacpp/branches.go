//go:build cgo

package llamacpp

import (
	"fmt"
	"time"
)

// maxFused bounds the branches one head's tokens go into as they are
// prefilled (the batch's sequences per token, less the head's own); a
// head's further members branch by copy.
const maxFused = 64

// branchSlot is an item whose last tail token is at batch index idx.
type branchSlot struct {
	it  *item
	idx int
}

// branches decodes the tails of a sub-round's items: each item gets a
// branch sequence holding its head (fused into the head's prefill, or
// copied from its cache sequence), then its tail tokens, logits on the
// last one; tails of many items share each decode call.
type branches struct {
	e         *Engine
	start     time.Time
	headSeqOf map[*item]int // the cache sequence of each item's head
	reserve   int           // sequences kept free for multi-token labels
	pending   *prefillRun   // the prefill whose last batch is not decoded yet; nil when none
	tails     int           // tail tokens in the batch
	fed       []*item       // items with tokens in the batch
	last      []branchSlot  // items whose last tail token is in the batch
	active    []*item       // items holding a branch
}

// newBranches prepares the branches of a sub-round's members.
func (e *Engine) newBranches(members [][]*item) *branches {
	b := &branches{e: e, start: time.Now(), headSeqOf: map[*item]int{}}
	for _, its := range members {
		for _, it := range its {
			if it.multi {
				// Keep one sequence free for label branches.
				b.reserve = 1
			}
		}
	}
	return b
}

// fuse gives live members of a head that is about to be prefilled from
// position reuse their branch sequences now, holding the cached part
// [0, reuse), and returns them: the head's new tokens go into these too,
// so their tails can follow in the same batch. Recurrent memories keep a
// state per sequence that a shared token cannot fork; there every member
// branches by copy.
func (b *branches) fuse(its []*item, headSeq, reuse int) ([]int, error) {
	e := b.e
	if e.recurrent {
		return nil, nil
	}
	var seqs []int
	for _, it := range its {
		if len(seqs) == maxFused {
			break
		}
		if it.hasSeq || !e.checkCaller(it) {
			continue
		}
		seq, ok := b.takeSeq()
		if !ok {
			break
		}
		if reuse > 0 {
			if err := e.lctx.SeqCopy(headSeq, seq, 0, reuse); err != nil {
				e.release(seq)
				return seqs, err
			}
		}
		it.seq, it.hasSeq = seq, true
		b.active = append(b.active, it)
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

// decodeBranches scores every live member whose head was prefilled
// (headSeq: per group, the cache sequence prefill left it in, -1 for
// none): those fused into the prefill first, so that their tails join
// its last batch.
func (e *Engine) decodeBranches(b *branches, headSeq []int, members [][]*item) error {
	var queue, later []*item
	for gi, its := range members {
		for _, it := range its {
			if headSeq[gi] >= 0 && e.checkCaller(it) {
				b.headSeqOf[it] = headSeq[gi]
				if it.hasSeq {
					queue = append(queue, it)
				} else {
					later = append(later, it)
				}
			}
		}
	}
	queue = append(queue, later...)
	for len(queue) > 0 {
		it := queue[0]
		if !it.hasSeq {
			if !e.checkCaller(it) {
				queue = queue[1:]
				continue
			}
			if err := b.branch(it); err != nil {
				return err
			}
		}
		room := min(e.opts.BranchBatchTokens-b.tails, e.batch.Cap()-e.batch.Len())
		n := min(room, len(it.tail)-it.cursor)
		// Keep the cells in use within the context: finish the branches
		// in flight before starting more, rather than overflowing the KV
		// cache and falling back to the slow retry path.
		if room <= 0 || (e.batch.Len() > 0 && len(b.active) > 1 && e.cellsInUse(b.active)+n > e.lctx.NCtx()) {
			if err := b.flush(); err != nil {
				return err
			}
			continue
		}
		if err := b.feed(it, n); err != nil {
			return err
		}
		if it.cursor == len(it.tail) {
			queue = queue[1:]
		}
	}
	if err := b.flush(); err != nil {
		return err
	}
	// Branches fused with a head whose members all stopped were never fed
	// (flush has finished every other one).
	for _, it := range b.active {
		e.release(it.seq)
		it.hasSeq = false
	}
	b.active = nil
	return nil
}

// branch gives it a branch sequence holding its head, flushing the batch
// first when no sequence is free, and while prefill's pending batch holds
// tokens of the head's sequence: the copy must find the head's cells
// decoded. A head that was resident already (a cached state riding along
// with a fresh one) is copied at once, and its tail joins that batch.
func (b *branches) branch(it *item) error {
	e := b.e
	if b.pending != nil && b.pending.holds(b.headSeqOf[it]) {
		if err := b.flush(); err != nil {
			return err
		}
	}
	seq, ok := b.takeSeq()
	if !ok {
		if err := b.flush(); err != nil {
			return err
		}
		if seq, ok = b.takeSeq(); !ok {
			return fmt.Errorf("llamacpp: no free sequence for a branch")
		}
	}
	it.seq, it.hasSeq = seq, true
	b.active = append(b.active, it)
	return e.lctx.SeqCopy(b.headSeqOf[it], seq, 0, len(it.head))
}

// takeSeq takes a free branch sequence, leaving the reserve.
func (b *branches) takeSeq() (int, bool) {
	if len(b.e.free) <= b.reserve {
		return 0, false
	}
	return b.e.takeSeq()
}

// feed adds the next n tail tokens of it to the batch.
func (b *branches) feed(it *item, n int) error {
	e := b.e
	if n > 0 {
		b.fed = append(b.fed, it)
	}
	for k := 0; k < n; k++ {
		p := it.cursor + k
		lastTok := p == len(it.tail)-1
		if err := e.batch.Add(it.tail[p], len(it.head)+p, []int{it.seq}, lastTok); err != nil {
			return err
		}
		if lastTok {
			b.last = append(b.last, branchSlot{it: it, idx: e.batch.Len() - 1})
		}
	}
	it.cursor += n
	it.evaluated += n
	b.tails += n
	return nil
}

// flush decodes the batch (unless none of its items is live and no head
// of the pending prefill batch is wanted any more), settles that prefill,
// reads the logits of the
// tails that ended in it, and then frees the branches of stopped and of
// finished items: finished single-token ones first, so that multi-token
// ones have sequences to expand their labels into.
func (b *branches) flush() error {
	e := b.e
	if e.batch.Len() > 0 {
		wanted := e.checkCallers(b.fed)
		if b.pending != nil {
			wanted = b.pending.batchWanted() || wanted
		}
		if wanted {
			if err := e.decode(); err != nil {
				return err
			}
			for _, s := range b.last {
				if !e.checkCaller(s.it) {
					continue
				}
				row, err := e.lctx.Logits(s.idx, e.model.VocabSize())
				if err != nil {
					return err
				}
				e.readRoot(s.it, row)
			}
		}
		if b.pending != nil {
			b.pending.settle(wanted)
			b.pending = nil
		}
		e.batch.Clear()
		b.fed, b.last, b.tails = b.fed[:0], b.last[:0], 0
	}
	kept := b.active[:0]
	var expand []*item
	for _, it := range b.active {
		switch {
		case !e.checkCaller(it):
			b.finish(it)
		case it.logp == nil:
			kept = append(kept, it)
		case it.multi:
			expand = append(expand, it)
		default:
			b.finish(it)
		}
	}
	for _, it := range expand {
		if err := e.expandLabels(it); err != nil {
			return err
		}
		b.finish(it)
	}
	b.active = kept
	return nil
}

// finish frees it's branch; it is scored unless it stopped.
func (b *branches) finish(it *item) {
	if it.err == nil {
		it.doneScore = true
		it.decode = time.Since(b.start)
	}
	b.e.release(it.seq)
	it.hasSeq = false
}

// cellsInUse bounds the KV cells held: every resident cached prefix
// (shared cells counted once per entry, so an over-estimate) plus each
// active branch's own tokens.
func (e *Engine) cellsInUse(active []*item) int {
	n := e.cache.residentTokens()
	for _, it := range active {
		n += it.cursor
	}
	return n
}
