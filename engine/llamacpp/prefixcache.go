package llamacpp

import (
	"log/slog"
	"slices"
	"time"

	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// kvSeqs are the operations on KV-memory sequences that the prefix cache
// needs; *llama.Context has them (the table tests use a fake).
type kvSeqs interface {
	// SeqCopy copies the cells of src in positions [p0, p1) to dst
	// (p0 < 0: from the start; p1 < 0: to the end).
	SeqCopy(src, dst, p0, p1 int) error
	// SeqRemove removes the cells of seq in [p0, p1). A recurrent memory
	// refuses to cut a sequence short.
	SeqRemove(seq, p0, p1 int) error
	// SeqSave serializes seq's cells (into buf when it is large enough).
	SeqSave(seq int, buf []byte) ([]byte, error)
	// SeqRestore puts cells SeqSave made back into seq; it fails when the
	// memory has no room.
	SeqRestore(seq int, data []byte) error
}

// prefixCache keeps state prefixes between requests, one per sequence id
// in [0, slots), so that a later request about the same state (or one that
// starts the same way) decodes only what is new. Entries are evicted least
// recently used beyond slots or maxTokens. It belongs to the decode loop:
// not safe for concurrent use.
//
// With the KV store every entry stays resident in the KV memory. With the
// host store (offload) an entry's cells are resident only while a
// sub-round uses it: offload saves them to host memory and frees them,
// and acquire restores them (a copy, far cheaper than prefilling them
// again: docs/performance.md, host store), so that between sub-rounds the
// KV memory is empty and no decode attends over cells that it does not
// need (on the CPU every resident cell costs each micro-batch a mask scan
// per head and layer).
type prefixCache struct {
	kv        kvSeqs
	slots     int  // sequence ids 0..slots-1 hold entries
	maxTokens int  // bound on the tokens of all entries
	wholeOnly bool // recurrent memory: an entry is reusable only whole
	offload   bool // host store: entries leave the KV memory between sub-rounds
	log       *slog.Logger
	round     int64 // the decode loop's round, for recency
	entries   []*cacheEntry
	moveNanos int64 // time spent saving and restoring entries (host store)
}

// cacheEntry is a state prefix at positions [0, len(tokens)) of sequence
// seq: its cells are in the KV memory when resident, else in saved.
type cacheEntry struct {
	seq      int
	tokens   []llama.Token
	used     int64 // round that last used it
	pinned   bool  // in use by the current sub-round
	resident bool
	saved    []byte // the cells of tokens as SeqSave wrote them; nil when stale
}

// newPrefixCache makes an empty cache over kv. wholeOnly is for recurrent
// and hybrid models: their state exists only at a sequence's last
// position, so a cached prefix is reused only when all of it is a prefix
// of the new head, and never cut back. offload picks the host store.
func newPrefixCache(kv kvSeqs, slots, maxTokens int, wholeOnly, offload bool, log *slog.Logger) *prefixCache {
	return &prefixCache{kv: kv, slots: slots, maxTokens: maxTokens, wholeOnly: wholeOnly, offload: offload, log: log}
}

// uncached is how many of head's tokens no entry holds: what acquiring
// it now would prefill. The decode loop budgets sub-rounds with it.
func (c *prefixCache) uncached(head []llama.Token) int {
	_, n := c.longest(head)
	return len(head) - n
}

// longest is the entry sharing the longest usable prefix with head, and
// that prefix's length (nil, 0: none).
func (c *prefixCache) longest(head []llama.Token) (*cacheEntry, int) {
	var best *cacheEntry
	bestN := 0
	for _, ent := range c.entries {
		n := commonPrefix(ent.tokens, head)
		if c.wholeOnly && n < len(ent.tokens) {
			// A recurrent state exists only at the entry's last token: an
			// entry is reusable only when all of it is a prefix of head.
			continue
		}
		if n > bestN {
			best, bestN = ent, n
		}
	}
	return best, bestN
}

// newRound starts a round of the decode loop (recency is counted in rounds).
func (c *prefixCache) newRound() { c.round++ }

// unpinAll ends a sub-round: every entry may be evicted again.
func (c *prefixCache) unpinAll() {
	for _, ent := range c.entries {
		ent.pinned = false
	}
}

// tokens is the number of tokens the entries hold (shared cells counted
// once per entry).
func (c *prefixCache) tokens() int {
	n := 0
	for _, ent := range c.entries {
		n += len(ent.tokens)
	}
	return n
}

// residentTokens is the number of tokens the entries hold in the KV
// memory (shared cells counted once per entry).
func (c *prefixCache) residentTokens() int {
	n := 0
	for _, ent := range c.entries {
		if ent.resident {
			n += len(ent.tokens)
		}
	}
	return n
}

// savedBytes is the host memory the saved entries take.
func (c *prefixCache) savedBytes() int {
	n := 0
	for _, ent := range c.entries {
		n += len(ent.saved)
	}
	return n
}

// forget empties the cache without touching the KV memory, after the
// memory itself was cleared.
func (c *prefixCache) forget() { c.entries = nil }

// dropAll removes every entry and its cells.
func (c *prefixCache) dropAll() {
	for _, ent := range c.entries {
		if ent.resident {
			_ = c.kv.SeqRemove(ent.seq, -1, -1) // whole-sequence removal cannot fail
		}
	}
	c.entries = nil
}

// offloadAll ends a sub-round with the host store: every resident entry's
// cells are saved (unless an unchanged copy is saved already) and freed.
// An entry that cannot be saved is dropped. With the KV store it does
// nothing.
func (c *prefixCache) offloadAll() {
	if !c.offload {
		return
	}
	kept := c.entries[:0]
	for _, ent := range c.entries {
		if c.offloadEntry(ent) {
			kept = append(kept, ent)
		}
	}
	clear(c.entries[len(kept):])
	c.entries = kept
}

// offloadEntry saves a resident entry's cells (unless an unchanged copy is
// saved already) and frees them; cells another sequence shares stay. It
// reports false when the entry could not be saved: its cells are freed
// and the caller drops it.
func (c *prefixCache) offloadEntry(ent *cacheEntry) bool {
	if !ent.resident {
		return true
	}
	if ent.saved == nil {
		t := time.Now()
		buf, err := c.kv.SeqSave(ent.seq, nil)
		c.moveNanos += int64(time.Since(t))
		if err != nil {
			c.log.Warn("llamacpp: prefix cache: cannot save an entry to host memory; dropping it", "seq", ent.seq, "tokens", len(ent.tokens), "err", err)
			_ = c.kv.SeqRemove(ent.seq, -1, -1)
			return false
		}
		ent.saved = buf
	}
	_ = c.kv.SeqRemove(ent.seq, -1, -1)
	ent.resident = false
	return true
}

// restore brings a saved entry's cells back into its sequence. On failure
// the entry is dropped and false returned.
func (c *prefixCache) restore(ent *cacheEntry) bool {
	if ent.resident {
		return true
	}
	t := time.Now()
	err := c.kv.SeqRestore(ent.seq, ent.saved)
	c.moveNanos += int64(time.Since(t))
	if err != nil {
		c.log.Warn("llamacpp: prefix cache: cannot restore an entry from host memory; dropping it", "seq", ent.seq, "tokens", len(ent.tokens), "err", err)
		c.evict(slices.Index(c.entries, ent))
		return false
	}
	ent.resident = true
	return true
}

// cut shortens the entry in seq to its first n tokens, for a prefill that
// stopped before the rest was decoded: the cells beyond n were never
// written, so only the record changes. An entry cut to nothing is dropped.
func (c *prefixCache) cut(seq, n int) {
	for i, ent := range c.entries {
		if ent.seq != seq {
			continue
		}
		if n >= len(ent.tokens) {
			return
		}
		if n > 0 {
			ent.tokens, ent.saved = ent.tokens[:n], nil
			return
		}
		_ = c.kv.SeqRemove(seq, -1, -1)
		ent.tokens = nil
		c.entries = append(c.entries[:i], c.entries[i+1:]...)
		return
	}
}

// acquire returns the cache sequence that will hold head, and how many of
// its leading tokens are already there; the caller prefills the rest.
// Exact and extending hits reuse the entry in place; a partial match
// copies the common part into a new entry; a miss takes a free or least
// recently used slot. The entry is pinned until unpinAll. An entry taken
// in this sub-round may still have tokens waiting in the caller's batch:
// copying from it would copy cells that do not exist yet, so flush runs
// first.
func (c *prefixCache) acquire(head []llama.Token, flush func() error) (seq, reuse int, err error) {
	best, bestN := c.longest(head)
	for best != nil && !c.restore(best) {
		best, bestN = c.longest(head) // it was dropped: the next best
	}
	if best != nil && bestN == len(head) {
		// The whole head is cached (perhaps as the start of a longer
		// prefix): branches copy [0, len(head)), so read it in place.
		best.used, best.pinned = c.round, true
		return best.seq, bestN, nil
	}
	if best != nil && bestN == len(best.tokens) && !best.pinned {
		best.tokens, best.saved = head, nil
		best.used, best.pinned = c.round, true
		c.trim(best)
		return best.seq, bestN, nil
	}
	if best != nil && bestN > 0 && !best.pinned && !c.hasRoomBesides(best) {
		// Every other slot is pinned: take best over in place, keeping
		// the common part (nothing reads it this sub-round). A recurrent
		// memory refuses to cut a sequence short; then the entry is
		// emptied and head prefilled whole.
		if err := c.kv.SeqRemove(best.seq, bestN, -1); err != nil {
			c.log.Debug("llamacpp: prefix cache: cannot truncate entry; prefilling it whole", "seq", best.seq, "keep", bestN, "err", err)
			if err := c.kv.SeqRemove(best.seq, -1, -1); err != nil {
				return 0, 0, err
			}
			bestN = 0
		}
		best.tokens, best.saved = head, nil
		best.used, best.pinned = c.round, true
		c.trim(best)
		return best.seq, bestN, nil
	}
	slot := c.freeSlot(best)
	ent := &cacheEntry{seq: slot, tokens: head, used: c.round, pinned: true, resident: true}
	if best == nil {
		bestN = 0
	} else if bestN > 0 {
		if best.pinned {
			if err := flush(); err != nil {
				return 0, 0, err
			}
			// The flush may have cut best back to what was decoded.
			bestN = min(bestN, len(best.tokens))
		}
	}
	if bestN > 0 {
		if err := c.kv.SeqCopy(best.seq, slot, 0, bestN); err != nil {
			c.log.Warn("llamacpp: prefix cache: copy of a cached prefix failed; prefilling it whole", "from", best.seq, "to", slot, "tokens", bestN, "err", err)
			bestN = 0
		}
	}
	if best != nil && !best.pinned && c.offload && !c.offloadEntry(best) {
		// With the host store, an entry restored only to lend its start
		// (often just the chat preamble every state shares) leaves the KV
		// memory again at once: the rest of its cells would only widen
		// every decode of this sub-round. The shared cells stay, held by
		// slot.
		c.evict(slices.Index(c.entries, best))
	}
	c.entries = append(c.entries, ent)
	c.trim(ent)
	return slot, bestN, nil
}

// hasRoomBesides reports whether a slot can be had without evicting keep:
// a free slot, or an unpinned entry other than keep.
func (c *prefixCache) hasRoomBesides(keep *cacheEntry) bool {
	if len(c.entries) < c.slots {
		return true
	}
	for _, ent := range c.entries {
		if ent != keep && !ent.pinned {
			return true
		}
	}
	return false
}

// freeSlot returns an empty cache sequence id, evicting the least recently
// used unpinned entry (avoid only when nothing else is left) when all are
// taken.
func (c *prefixCache) freeSlot(avoid *cacheEntry) int {
	usedSlots := map[int]bool{}
	for _, ent := range c.entries {
		usedSlots[ent.seq] = true
	}
	for s := 0; s < c.slots; s++ {
		if !usedSlots[s] {
			_ = c.kv.SeqRemove(s, -1, -1)
			return s
		}
	}
	victim := c.lru(func(ent *cacheEntry) bool { return ent != avoid })
	if victim < 0 {
		victim = c.lru(func(*cacheEntry) bool { return true }) // only avoid is left: evict it after all
	}
	if victim < 0 {
		// Cannot happen: sub-rounds hold at most slots groups.
		panic("llamacpp: every prefix-cache slot is pinned")
	}
	return c.evict(victim)
}

// trim evicts least recently used entries (never keep, never pinned ones)
// until the cached tokens fit maxTokens.
func (c *prefixCache) trim(keep *cacheEntry) {
	for c.tokens() > c.maxTokens {
		victim := c.lru(func(ent *cacheEntry) bool { return ent != keep })
		if victim < 0 {
			return
		}
		c.evict(victim)
	}
}

// lru is the index of the least recently used unpinned entry that ok
// accepts, or -1.
func (c *prefixCache) lru(ok func(*cacheEntry) bool) int {
	victim := -1
	for i, ent := range c.entries {
		if !ent.pinned && ok(ent) && (victim < 0 || ent.used < c.entries[victim].used) {
			victim = i
		}
	}
	return victim
}

// evict removes entry i and its cells and returns its sequence id.
func (c *prefixCache) evict(i int) int {
	s := c.entries[i].seq
	c.entries = append(c.entries[:i], c.entries[i+1:]...)
	_ = c.kv.SeqRemove(s, -1, -1)
	return s
}

func commonPrefix(a, b []llama.Token) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
