package llamacpp

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

// fakeKV is a fake of llama.cpp's KV memory (these tests need no
// llama.cpp): it keeps how many leading cells each sequence holds and
// logs every operation. wholeOnly refuses to cut a sequence short, as a
// recurrent memory does; failCopy makes every copy fail, failSave every
// save and failRestore every restore.
type fakeKV struct {
	cells       map[int]int
	ops         []string
	wholeOnly   bool
	failCopy    bool
	failSave    bool
	failRestore bool
}

// SeqSave "serializes" a sequence as one byte per cell.
func (kv *fakeKV) SeqSave(seq int, buf []byte) ([]byte, error) {
	kv.ops = append(kv.ops, fmt.Sprintf("save %d", seq))
	if kv.failSave || kv.cells[seq] == 0 {
		return nil, errors.New("fake: save refused")
	}
	return bytes.Repeat([]byte{'.'}, kv.cells[seq]), nil
}

func (kv *fakeKV) SeqRestore(seq int, data []byte) error {
	kv.ops = append(kv.ops, fmt.Sprintf("restore %d", seq))
	kv.cells[seq] = 0
	if kv.failRestore || len(data) == 0 {
		return errors.New("fake: restore refused")
	}
	kv.cells[seq] = len(data)
	return nil
}

// resident is the number of cells the fake holds.
func (kv *fakeKV) resident() int {
	n := 0
	for _, c := range kv.cells {
		n += c
	}
	return n
}

func (kv *fakeKV) SeqCopy(src, dst, p0, p1 int) error {
	kv.ops = append(kv.ops, fmt.Sprintf("cp %d>%d %d", src, dst, p1))
	if kv.failCopy || src == dst {
		return errors.New("fake: copy refused")
	}
	kv.cells[dst] = min(p1, kv.cells[src])
	return nil
}

func (kv *fakeKV) SeqRemove(seq, p0, p1 int) error {
	if p0 < 0 {
		kv.ops = append(kv.ops, fmt.Sprintf("rm %d", seq))
		kv.cells[seq] = 0
		return nil
	}
	kv.ops = append(kv.ops, fmt.Sprintf("rm %d from %d", seq, p0))
	if kv.wholeOnly && p0 < kv.cells[seq] {
		return errors.New("fake: partial removal refused")
	}
	kv.cells[seq] = min(kv.cells[seq], p0)
	return nil
}

// toks spells tokens as letters: "abc" is three tokens.
func toks(s string) []llama.Token {
	out := make([]llama.Token, len(s))
	for i := range s {
		out[i] = llama.Token(s[i])
	}
	return out
}

// step is one acquire (after newRound when round is set), checked
// against the sequence and reuse it must give; the test then "prefills"
// the head into the fake. cut, when set, cuts the entry in want seq
// back to that many tokens instead of prefilling the rest.
type step struct {
	round     bool
	head      string
	seq       int
	reuse     int
	cut       int // > 0: cut the entry back to this many tokens after acquire
	flushCuts int // > 0: the flush acquire may run cuts its source to this
}

func TestPrefixCacheTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		slots     int
		maxTokens int
		wholeOnly bool
		failCopy  bool
		steps     []step
		ops       []string // the fake's operations after the last step; nil: not checked
		flushes   int      // flush calls expected
		log       string   // a line the log must contain
		entries   []string // the entries left, in order
	}{
		{name: "miss, then an exact hit in place", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abcdef", seq: 0}, {round: true, head: "abcdef", seq: 0, reuse: 6}},
			ops:     []string{"rm 0"},
			entries: []string{"abcdef"}},
		{name: "a longer head extends its entry in place", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abc", seq: 0}, {round: true, head: "abcdef", seq: 0, reuse: 3}},
			entries: []string{"abcdef"}},
		{name: "a head that starts a cached entry reads it in place", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abcdef", seq: 0}, {round: true, head: "abc", seq: 0, reuse: 3}},
			entries: []string{"abcdef"}},
		{name: "a partial match copies the common part into a new entry", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abcdef", seq: 0}, {round: true, head: "abcxyz", seq: 1, reuse: 3}},
			ops:     []string{"rm 0", "rm 1", "cp 0>1 3"},
			entries: []string{"abcdef", "abcxyz"}},
		{name: "recurrent: a partly shared entry is not reused", slots: 2, maxTokens: 100, wholeOnly: true,
			steps:   []step{{head: "abcdef", seq: 0}, {round: true, head: "abcxyz", seq: 1, reuse: 0}},
			ops:     []string{"rm 0", "rm 1"},
			entries: []string{"abcdef", "abcxyz"}},
		{name: "recurrent: a head shorter than the entry is not reused", slots: 2, maxTokens: 100, wholeOnly: true,
			steps:   []step{{head: "abcdef", seq: 0}, {round: true, head: "abc", seq: 1, reuse: 0}},
			entries: []string{"abcdef", "abc"}},
		{name: "recurrent: a whole entry that starts the head is extended", slots: 2, maxTokens: 100, wholeOnly: true,
			steps:   []step{{head: "abc", seq: 0}, {round: true, head: "abcdef", seq: 0, reuse: 3}},
			ops:     []string{"rm 0"},
			entries: []string{"abcdef"}},
		{name: "every other slot pinned: the best match is taken over and cut back", slots: 2, maxTokens: 100,
			steps: []step{{head: "abcdef", seq: 0}, {round: true, head: "zzzz", seq: 1},
				{head: "abcxyz", seq: 0, reuse: 3}},
			ops:     []string{"rm 0", "rm 1", "rm 0 from 3"},
			entries: []string{"abcxyz", "zzzz"}},
		{name: "recurrent, slots pinned: a partly shared entry is never cut back", slots: 2, maxTokens: 100, wholeOnly: true,
			steps: []step{{head: "abcdef", seq: 0}, {round: true, head: "zzzz", seq: 1},
				{head: "abcxyz", seq: 0, reuse: 0}},
			ops:     []string{"rm 0", "rm 1", "rm 0"},
			entries: []string{"zzzz", "abcxyz"}},
		{name: "a failed copy is logged and the head prefilled whole", slots: 2, maxTokens: 100, failCopy: true,
			steps: []step{{head: "abcdef", seq: 0}, {round: true, head: "abcxyz", seq: 1, reuse: 0}},
			log:   "copy of a cached prefix failed", entries: []string{"abcdef", "abcxyz"}},
		{name: "the least recently used entry makes room", slots: 2, maxTokens: 100,
			steps: []step{{head: "aaaa", seq: 0}, {round: true, head: "bbbb", seq: 1},
				{round: true, head: "aaaa", seq: 0, reuse: 4}, {round: true, head: "cccc", seq: 1}},
			entries: []string{"aaaa", "cccc"}},
		{name: "entries beyond the token budget are evicted, oldest first", slots: 4, maxTokens: 8,
			steps: []step{{head: "aaaa", seq: 0}, {round: true, head: "bbbb", seq: 1},
				{round: true, head: "cccc", seq: 2}},
			entries: []string{"bbbb", "cccc"}},
		{name: "copying from an entry of this sub-round flushes its prefill first", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abcdef", seq: 0}, {head: "abcxyz", seq: 1, reuse: 3}},
			flushes: 1, entries: []string{"abcdef", "abcxyz"}},
		{name: "a flush that cuts the source back bounds the copy", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abcdef", seq: 0}, {head: "abcxyz", seq: 1, reuse: 2, flushCuts: 2}},
			flushes: 1, entries: []string{"ab", "abcxyz"}},
		{name: "a prefill cut back keeps what was decoded", slots: 2, maxTokens: 100,
			steps:   []step{{head: "abcdef", seq: 0, cut: 4}, {round: true, head: "abcdef", seq: 0, reuse: 4}},
			entries: []string{"abcdef"}},
	} {
		// Every case holds for both stores: with the host store, the
		// cells leave the memory between rounds and come back on a hit
		// (the operations are checked for the KV store).
		for _, offload := range []bool{false, true} {
			if offload && tc.wholeOnly {
				continue // the host store is not for recurrent models
			}
			name := tc.name
			if offload {
				name += " (host store)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				kv := &fakeKV{cells: map[int]int{}, wholeOnly: tc.wholeOnly, failCopy: tc.failCopy}
				var logs bytes.Buffer
				c := newPrefixCache(kv, tc.slots, tc.maxTokens, tc.wholeOnly, offload, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
				flushes := 0
				c.newRound()
				for i, st := range tc.steps {
					if st.round {
						c.unpinAll()
						c.offloadAll()
						if offload {
							require.Zero(t, kv.resident(), "step %d: cells resident between rounds with the host store", i)
							require.Zero(t, c.residentTokens())
						}
						c.newRound()
					}
					flush := func() error {
						flushes++
						if st.flushCuts > 0 {
							c.cut(0, st.flushCuts)
						}
						return nil
					}
					seq, reuse, err := c.acquire(toks(st.head), flush)
					require.NoError(t, err)
					require.Equal(t, st.seq, seq, "step %d (%s): sequence", i, st.head)
					require.Equal(t, st.reuse, reuse, "step %d (%s): reused tokens", i, st.head)
					require.LessOrEqual(t, reuse, kv.cells[seq], "step %d: reuses cells the memory does not hold", i)
					if st.cut > 0 {
						c.cut(seq, st.cut)
						kv.cells[seq] = st.cut
					} else {
						kv.cells[seq] = max(kv.cells[seq], len(st.head))
					}
				}
				if tc.ops != nil && !offload {
					require.Equal(t, tc.ops, kv.ops)
				}
				require.Equal(t, tc.flushes, flushes, "flushes")
				if tc.log != "" {
					require.Contains(t, logs.String(), tc.log)
					require.Contains(t, logs.String(), "level=WARN")
				}
				var got []string
				for _, ent := range c.entries {
					var b strings.Builder
					for _, tok := range ent.tokens {
						b.WriteByte(byte(tok))
					}
					got = append(got, b.String())
					require.LessOrEqual(t, len(ent.tokens), max(kv.cells[ent.seq], len(ent.tokens)))
				}
				require.Equal(t, tc.entries, got)
				require.LessOrEqual(t, c.tokens(), max(tc.maxTokens, len(tc.steps[len(tc.steps)-1].head)))
			})
		}
	}
}

// cut to nothing drops the entry and empties its sequence.
func TestPrefixCacheCutToNothingDropsTheEntry(t *testing.T) {
	t.Parallel()
	kv := &fakeKV{cells: map[int]int{}}
	c := newPrefixCache(kv, 2, 100, false, false, slog.New(slog.DiscardHandler))
	seq, _, err := c.acquire(toks("abc"), func() error { return nil })
	require.NoError(t, err)
	c.cut(seq, 0)
	require.Empty(t, c.entries)
	require.Equal(t, []string{"rm 0", "rm 0"}, kv.ops)
	c.unpinAll()
	c.dropAll()
	require.Zero(t, c.tokens())
}

// With the host store an entry is saved once while unchanged: a hit
// restores it and the next offload frees its cells without saving again;
// an entry extended in place is saved anew.
func TestPrefixCacheHostStoreSavesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	kv := &fakeKV{cells: map[int]int{}}
	c := newPrefixCache(kv, 2, 100, false, true, slog.New(slog.DiscardHandler))
	round := func(head string, wantReuse int) {
		t.Helper()
		c.newRound()
		seq, reuse, err := c.acquire(toks(head), func() error { return nil })
		require.NoError(t, err)
		require.Equal(t, wantReuse, reuse)
		require.Equal(t, reuse, kv.cells[seq], "the reused cells are back in the memory")
		require.Equal(t, reuse, kv.resident(), "nothing else is: a source that lent its start left again")
		kv.cells[seq] = len(head) // the prefill
		c.unpinAll()
		c.offloadAll()
		require.Zero(t, kv.resident())
	}
	round("abcd", 0)
	require.Equal(t, []string{"rm 0", "save 0", "rm 0"}, kv.ops)
	kv.ops = nil
	round("abcd", 4)
	require.Equal(t, []string{"restore 0", "rm 0"}, kv.ops, "an unchanged entry is not saved again")
	kv.ops = nil
	round("abcdef", 4)
	require.Equal(t, []string{"restore 0", "save 0", "rm 0"}, kv.ops, "an extended entry is saved anew")
	require.Equal(t, 6, c.savedBytes())
	kv.ops = nil
	round("abxy", 2) // a partial match: restore the source, copy its common part
	require.Equal(t, []string{"restore 0", "rm 1", "cp 0>1 2", "rm 0", "save 1", "rm 1"}, kv.ops)
	require.Equal(t, 10, c.savedBytes())
}

// An entry that cannot be saved or restored is dropped with a warning,
// and the head is prefilled whole: never a wrong reuse, never a stuck
// cache.
func TestPrefixCacheHostStoreFailures(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	kv := &fakeKV{cells: map[int]int{}}
	c := newPrefixCache(kv, 2, 100, false, true, slog.New(slog.NewTextHandler(&logs, nil)))
	acquire := func(head string) (int, int) {
		c.newRound()
		seq, reuse, err := c.acquire(toks(head), func() error { return nil })
		require.NoError(t, err)
		kv.cells[seq] = len(head)
		c.unpinAll()
		c.offloadAll()
		return seq, reuse
	}
	acquire("abcd")
	kv.failRestore = true
	_, reuse := acquire("abcd")
	require.Zero(t, reuse, "an entry that cannot be restored is not reused")
	require.Contains(t, logs.String(), "cannot restore an entry")
	require.Len(t, c.entries, 1, "the failed entry is dropped, the new prefill cached")
	kv.failRestore, kv.failSave = false, true
	_, reuse = acquire("wxyz")
	require.Zero(t, reuse)
	require.Contains(t, logs.String(), "cannot save an entry")
	require.Len(t, c.entries, 1, "what could not be saved is not cached")
	require.Equal(t, toks("abcd"), c.entries[0].tokens)
	require.Zero(t, kv.resident())
}
