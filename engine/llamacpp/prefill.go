//go:build cgo

package llamacpp

import "github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"

// prefill puts every head with a live member into a cache sequence,
// decoding what the cache does not hold yet, and returns the run: its
// headSeq is each head's sequence (-1 for a head left out). A batch none
// of whose heads has a live member is dropped undecoded, and a head whose
// members all stop is cut back to what was decoded, so that stopped work
// ends within one decode call.
//
// The tokens a head adds also go into branch sequences of its members
// (b.fuse), and the last batch is left for decodeBranches to fill with
// tails (b.pending): a decision's tail is then decoded in the same call,
// often the same micro-batch, as the end of its state, instead of in a
// small batch of its own after a copy. That matters on the CPU, where
// ggml's flash attention has a tiled kernel only for micro-batches of 64
// tokens or more (docs/performance.md, small suffix batches) and every
// decode call pays its fixed costs.
func (e *Engine) prefill(heads [][]llama.Token, members [][]*item, b *branches) (*prefillRun, error) {
	p := &prefillRun{e: e, members: members, headSeq: make([]int, len(heads))}
	e.batch.Clear()
	for g, head := range heads {
		if err := p.prefillHead(g, head, b); err != nil {
			return nil, err
		}
	}
	if e.batch.Len() > 0 {
		b.pending = p
	}
	return p, nil
}

// prefillRun is one sub-round's prefill. It owns the heads' cache
// sequences and the record of which heads have tokens in the batch; the
// batch itself is the engine's. When its last batch is left for the first
// tails, branches holds the run (branches.pending) and settles it after
// that batch's decode.
type prefillRun struct {
	e       *Engine
	members [][]*item     // per group: its decisions
	headSeq []int         // per group: the cache sequence of its head; -1 when left out or cut
	inBatch []*prefilling // heads with tokens in the batch, in the order added
}

// prefilling is a head whose tokens are being decoded into cache sequence
// seq: [0, decoded) are in the KV memory, [decoded, added) wait in the
// batch.
type prefilling struct {
	seq, decoded, added int
}

// prefillHead gives group g's head a cache sequence and adds the tokens
// the cache does not hold to the batch (and to its members' fused
// branches), flushing full batches. A group without live members is left
// out; one whose members all stop during a flush is cut there.
func (p *prefillRun) prefillHead(g int, head []llama.Token, b *branches) error {
	e := p.e
	p.headSeq[g] = -1
	liveMembers := 0
	for _, it := range p.members[g] {
		if e.checkCaller(it) {
			liveMembers++
		}
	}
	if liveMembers == 0 {
		return nil
	}
	seq, reuse, err := e.cache.acquire(head, p.flush)
	if err != nil {
		return err
	}
	p.headSeq[g] = seq
	if reuse > 0 {
		e.stats.hits.Add(1)
	} else {
		e.stats.misses.Add(1)
	}
	e.stats.saved.Add(int64(reuse + len(head)*(liveMembers-1)))
	for _, it := range p.members[g] {
		if it.err == nil {
			it.evaluated += len(head) - reuse // the first live member pays for the head
			break
		}
	}
	seqs := []int{seq}
	if reuse < len(head) {
		fused, err := b.fuse(p.members[g], seq, reuse)
		if err != nil {
			return err
		}
		seqs = append(seqs, fused...)
	}
	h := &prefilling{seq: seq, decoded: reuse, added: reuse}
	for h.added < len(head) {
		if e.batch.Len() == e.batch.Cap() {
			if err := p.flush(); err != nil {
				return err
			}
			if p.headSeq[g] < 0 {
				return nil // every member stopped: the head was cut
			}
		}
		if len(p.inBatch) == 0 || p.inBatch[len(p.inBatch)-1] != h {
			p.inBatch = append(p.inBatch, h)
		}
		if err := e.batch.Add(head[h.added], h.added, seqs, false); err != nil {
			return err
		}
		h.added++
	}
	return nil
}

// flush decodes the batch unless no head in it is wanted any more, then
// settles the heads in it. The prefix cache calls it too, before it
// copies from a sequence whose tokens may still wait in the batch.
func (p *prefillRun) flush() error {
	e := p.e
	if e.batch.Len() == 0 {
		return nil
	}
	wanted := p.batchWanted()
	if wanted {
		if err := e.decode(); err != nil {
			return err
		}
	}
	p.settle(wanted)
	e.batch.Clear()
	return nil
}

// seqWanted reports whether cache sequence seq is still wanted: a group
// that reads it has a live member (groups may share one: a head that is
// the start of another). It checks every member's caller (checkCaller).
func (p *prefillRun) seqWanted(seq int) bool {
	for g, s := range p.headSeq {
		if s == seq && p.e.checkCallers(p.members[g]) {
			return true
		}
	}
	return false
}

// batchWanted reports whether any head with tokens in the batch is still
// wanted; every one is checked, so that every stop is recorded.
func (p *prefillRun) batchWanted() bool {
	wanted := false
	for _, h := range p.inBatch {
		wanted = p.seqWanted(h.seq) || wanted
	}
	return wanted
}

// settle records what a decode of the batch (decoded) or its drop did to
// the heads in it: a head no longer wanted is cut back to what was
// decoded, and its groups are left out of the sub-round.
func (p *prefillRun) settle(decoded bool) {
	for _, h := range p.inBatch {
		if decoded {
			h.decoded = h.added
		}
		if !p.seqWanted(h.seq) {
			p.e.cache.cut(h.seq, h.decoded)
			for g, s := range p.headSeq {
				if s == h.seq {
					p.headSeq[g] = -1
				}
			}
		}
	}
	p.inBatch = p.inBatch[:0]
}

// holds reports whether cache sequence seq has tokens in the batch.
func (p *prefillRun) holds(seq int) bool {
	for _, h := range p.inBatch {
		if h.seq == seq {
			return true
		}
	}
	return false
}
