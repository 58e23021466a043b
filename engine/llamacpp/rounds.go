//go:build cgo

package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"time"

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
// decoded in a branch of it. A failed decode is retried once on a clean
// KV state, then one decision at a time, so that a failure stays with the
// decisions that cause it.
func (e *Engine) runSubRound(sub []*group) {
	e.cache.newRound()
	now := time.Now()
	var heads [][]llama.Token
	var members [][]*item
	for _, g := range sub {
		var live []*item
		for _, it := range g.items {
			it.queued = now.Sub(it.job.enqueued)
			if e.live(it) {
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
	err := e.subRound(heads, members)
	if err == nil {
		return
	}
	slog.Warn("llamacpp: decode failed; retrying on a clean cache", "err", err)
	e.resetKV()
	e.resetItems(members)
	if err := e.subRound(heads, members); err == nil {
		return
	}
	e.resetKV()
	e.resetItems(members)
	for _, its := range members {
		for _, it := range its {
			e.resetKV() // alone on an empty cache: what fits alone is scored
			if err := e.subRound([][]llama.Token{it.head}, [][]*item{{it}}); err != nil {
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

func mapDecodeErr(err error) error {
	if errors.Is(err, llama.ErrNoKVSlot) {
		return fmt.Errorf("%w: %w", engine.ErrContextFull, err)
	}
	return err
}

func (e *Engine) resetItems(members [][]*item) {
	for _, its := range members {
		for _, it := range its {
			it.cursor, it.evaluated, it.logp, it.doneScore, it.hasSeq = 0, 0, nil, false, false
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

// subRound prefills each head once (reusing cached prefixes), then decodes
// every member's tail in a branch of its head, packing branches of all
// groups into shared batches. Work stops within one decode call of a
// caller giving up or the engine closing (see live).
func (e *Engine) subRound(heads [][]llama.Token, members [][]*item) error {
	e.cache.unpinAll()
	b := e.newBranches(members)
	headSeq, err := e.prefill(heads, members, b)
	if err != nil {
		return err
	}
	if err := e.decodeBranches(b, headSeq, members); err != nil {
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

// live reports whether an item is still to be scored. One whose caller
// gave up (its context's cause) or whose engine is closing
// (engine.ErrClosed) gets that as its error and stops.
func (e *Engine) live(it *item) bool {
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

// anyLive reports whether any of its is still to be scored.
func (e *Engine) anyLive(its []*item) bool {
	live := false
	for _, it := range its {
		live = e.live(it) || live // every item's stop is recorded
	}
	return live
}

// prefilling is a head whose tokens are being decoded into cache sequence
// seq: [0, decoded) are in the KV memory, [decoded, added) wait in the
// batch.
type prefilling struct {
	group, seq, decoded, added int
}

// prefill puts every head with a live member into a cache sequence,
// decoding what the cache does not hold yet, and returns each head's
// sequence (-1 for a head left out). A batch none of whose heads has a
// live member is dropped undecoded, and a head whose members all stop is
// cut back to what was decoded, so that stopped work ends within one
// decode call.
//
// The tokens a head adds also go into branch sequences of its members
// (b.fuse), and the last batch is left for decodeBranches to fill with
// tails (b.pending): a decision's tail is then decoded in the same call,
// often the same micro-batch, as the end of its state, instead of in a
// small batch of its own after a copy. That matters on the CPU, where
// attention over a long prefix is several times slower per token in a
// micro-batch of fewer than 64 tokens (ggml's untiled flash-attention
// path) and every decode call pays its fixed costs.
func (e *Engine) prefill(heads [][]llama.Token, members [][]*item, b *branches) ([]int, error) {
	headSeq := make([]int, len(heads))
	var inBatch []*prefilling
	e.batch.Clear()
	// A cache sequence is live while a group that reads it has a live
	// member (groups may share one: a head that is the start of another).
	seqLive := func(seq int) bool {
		for g, s := range headSeq {
			if s == seq && e.anyLive(members[g]) {
				return true
			}
		}
		return false
	}
	live := func() bool {
		live := false
		for _, h := range inBatch {
			live = seqLive(h.seq) || live
		}
		return live
	}
	// settle records what a decode of the batch (or its drop) did to the
	// heads in it.
	settle := func(decoded bool) {
		for _, h := range inBatch {
			if decoded {
				h.decoded = h.added
			}
			if !seqLive(h.seq) {
				e.cache.cut(h.seq, h.decoded)
				for g, s := range headSeq {
					if s == h.seq {
						headSeq[g] = -1
					}
				}
			}
		}
		inBatch = inBatch[:0]
	}
	flush := func() error {
		if e.batch.Len() == 0 {
			return nil
		}
		ok := live()
		if ok {
			if err := e.decode(); err != nil {
				return err
			}
		}
		settle(ok)
		e.batch.Clear()
		return nil
	}
	for gi, head := range heads {
		headSeq[gi] = -1
		live := 0
		for _, it := range members[gi] {
			if e.live(it) {
				live++
			}
		}
		if live == 0 {
			continue
		}
		seq, reuse, err := e.cache.acquire(head, flush)
		if err != nil {
			return nil, err
		}
		headSeq[gi] = seq
		if reuse > 0 {
			e.stats.hits.Add(1)
		} else {
			e.stats.misses.Add(1)
		}
		e.stats.saved.Add(int64(reuse + len(head)*(live-1)))
		for _, it := range members[gi] {
			if it.err == nil {
				it.evaluated += len(head) - reuse // the first live member pays for the head
				break
			}
		}
		seqs := []int{seq}
		if reuse < len(head) {
			fused, err := b.fuse(members[gi], seq, reuse)
			if err != nil {
				return nil, err
			}
			seqs = append(seqs, fused...)
		}
		h := &prefilling{group: gi, seq: seq, decoded: reuse, added: reuse}
		for h.added < len(head) {
			if e.batch.Len() == e.batch.Cap() {
				if err := flush(); err != nil {
					return nil, err
				}
				if headSeq[gi] < 0 {
					break
				}
			}
			if len(inBatch) == 0 || inBatch[len(inBatch)-1] != h {
				inBatch = append(inBatch, h)
			}
			if err := e.batch.Add(head[h.added], h.added, seqs, false); err != nil {
				return nil, err
			}
			h.added++
		}
	}
	if e.batch.Len() > 0 {
		b.pending = &pendingPrefill{live: live, settle: settle, holds: func(seq int) bool {
			for _, h := range inBatch {
				if h.seq == seq {
					return true
				}
			}
			return false
		}}
	}
	return headSeq, nil
}

// pendingPrefill is prefill's last batch, decoded together with the first
// tails: live reports whether any head in it still has a live member, and
// settle records the decode (or the drop) of those heads.
type pendingPrefill struct {
	live   func() bool
	settle func(decoded bool)
	holds  func(seq int) bool // whether cache sequence seq has tokens in it
}

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
	e       *Engine
	start   time.Time
	headSeq map[*item]int   // the cache sequence of each item's head
	reserve int             // sequences kept free for multi-token labels
	pending *pendingPrefill // prefill's batch, not decoded yet
	tails   int             // tail tokens in the batch
	fed     []*item         // items with tokens in the batch
	last    []branchSlot    // items whose last tail token is in the batch
	active  []*item         // items holding a branch
}

// newBranches prepares the branches of a sub-round's members.
func (e *Engine) newBranches(members [][]*item) *branches {
	b := &branches{e: e, start: time.Now(), headSeq: map[*item]int{}}
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
		if it.hasSeq || !e.live(it) {
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

// decodeBranches scores every live member whose head was prefilled into
// headSeq: those fused into the prefill first, so that their tails join
// its last batch.
func (e *Engine) decodeBranches(b *branches, headSeq []int, members [][]*item) error {
	var queue, later []*item
	for gi, its := range members {
		for _, it := range its {
			if headSeq[gi] >= 0 && e.live(it) {
				b.headSeq[it] = headSeq[gi]
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
			if !e.live(it) {
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
	if b.pending != nil && b.pending.holds(b.headSeq[it]) {
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
	return e.lctx.SeqCopy(b.headSeq[it], seq, 0, len(it.head))
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

// flush decodes the batch (unless none of its items and no head of
// prefill's pending batch is live any more), reads the logits of the
// tails that ended in it, and then frees the branches of stopped and of
// finished items: finished single-token ones first, so that multi-token
// ones have sequences to expand their labels into.
func (b *branches) flush() error {
	e := b.e
	if e.batch.Len() > 0 {
		live := false
		for _, it := range b.fed {
			live = e.live(it) || live
		}
		if b.pending != nil {
			live = b.pending.live() || live
		}
		if live {
			if err := e.decode(); err != nil {
				return err
			}
			for _, s := range b.last {
				if !e.live(s.it) {
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
			b.pending.settle(live)
			b.pending = nil
		}
		e.batch.Clear()
		b.fed, b.last, b.tails = b.fed[:0], b.last[:0], 0
	}
	kept := b.active[:0]
	var expand []*item
	for _, it := range b.active {
		switch {
		case !e.live(it):
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

// readRoot reads an item's slot values from the row at its last prompt
// token: raw logits for single-token slots, log-probabilities of the first
// label token for multi-token ones.
func (e *Engine) readRoot(it *item, row []float32) {
	it.logp = make([]float64, len(it.labels))
	if !it.multi {
		for i, l := range it.labels {
			it.logp[i] = float64(row[l[0]])
		}
		return
	}
	lse := logSumExp(row)
	for i, l := range it.labels {
		it.logp[i] = float64(row[l[0]]) - lse
	}
}

// expandLabels adds, for each multi-token label, the log-probabilities of
// its later tokens. Every proper prefix of a label that longer labels
// extend is one node: a branch copied from the item's sequence, fed the
// prefix's tokens, logits on its last. Nodes are decoded in waves bounded
// by the free sequences and the batch size; an item that stops is left
// between waves.
func (e *Engine) expandLabels(it *item) error {
	type node struct {
		path []llama.Token
		idx  int
		seq  int
	}
	seen := map[string]bool{}
	var nodes []*node
	for _, l := range it.labels {
		for d := 1; d < len(l); d++ {
			k := tokenKey(l[:d])
			if !seen[k] {
				seen[k] = true
				nodes = append(nodes, &node{path: l[:d]})
			}
		}
	}
	rows := map[string][]float64{} // node key → log-probs of the label tokens that follow it
	base := len(it.head) + len(it.tail)
	for len(nodes) > 0 {
		if !e.live(it) {
			return nil // stopped: the caller frees its branch
		}
		e.batch.Clear()
		var wave []*node
		for len(nodes) > 0 {
			nd := nodes[0]
			if e.batch.Cap()-e.batch.Len() < len(nd.path) {
				break
			}
			seq, ok := e.takeSeq()
			if !ok {
				break
			}
			if err := e.lctx.SeqCopy(it.seq, seq, 0, base); err != nil {
				e.release(seq)
				return err
			}
			nd.seq = seq
			for k, t := range nd.path {
				last := k == len(nd.path)-1
				if err := e.batch.Add(t, base+k, []int{seq}, last); err != nil {
					return err
				}
			}
			nd.idx = e.batch.Len() - 1
			it.evaluated += len(nd.path)
			wave = append(wave, nd)
			nodes = nodes[1:]
		}
		if len(wave) == 0 {
			return fmt.Errorf("llamacpp: no room to expand a label (batch %d, free sequences %d)", e.batch.Cap(), len(e.free))
		}
		err := e.decode()
		if err == nil {
			for _, nd := range wave {
				row, lerr := e.lctx.Logits(nd.idx, e.model.VocabSize())
				if lerr != nil {
					err = lerr
					break
				}
				lse := logSumExp(row)
				vals := make([]float64, 0)
				for _, l := range it.labels {
					if len(l) > len(nd.path) && equalTokens(l[:len(nd.path)], nd.path) {
						vals = append(vals, float64(row[l[len(nd.path)]])-lse)
					}
				}
				rows[tokenKey(nd.path)] = vals
			}
		}
		for _, nd := range wave {
			e.release(nd.seq)
		}
		if err != nil {
			return err
		}
	}
	e.batch.Clear()
	// Add each label's later tokens, in the order the values were stored.
	used := map[string]int{}
	for i, l := range it.labels {
		for d := 1; d < len(l); d++ {
			k := tokenKey(l[:d])
			it.logp[i] += rows[k][used[k]]
			used[k]++
		}
	}
	return nil
}

func logSumExp(row []float32) float64 {
	maxv := float32(math.Inf(-1))
	for _, v := range row {
		if v > maxv {
			maxv = v
		}
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v - maxv))
	}
	return float64(maxv) + math.Log(sum)
}

// decode runs the current batch and counts it.
func (e *Engine) decode() error {
	if e.beforeDecodeFunc != nil {
		e.beforeDecodeFunc()
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
