//go:build cgo

package llama

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPromptLayouts decodes one 450-token prompt in the layouts an
// engine can give it, interleaved within every iteration (a noisy machine
// slows them alike), and reports each one's median milliseconds per
// decode: in a one-sequence context (llama-server's one slot); in
// verdict's context (128 sequences, unified KV) as one sequence; there
// with the state's tokens in two sequences (cache and branch) and the
// tail in the branch, as verdict fuses a single decision; and the same
// after 1,024 resident cells of another sequence (a prefix cache kept in
// the KV memory). The model is VERDICT_BENCH_MODEL (a `small` synthetic
// model shows the costs; the default tiny one only checks the code runs):
//
//	VERDICT_BENCH_MODEL=.verdict/models/verdict-synth-small-seed1.gguf \
//	  go test -run '^$' -bench PromptLayouts -benchtime 5x ./engine/llamacpp/internal/llama
func BenchmarkPromptLayouts(b *testing.B) {
	path := os.Getenv("VERDICT_BENCH_MODEL")
	if path == "" {
		path = tinyPath
	}
	m, err := LoadModel(path, ModelParams{UseMmap: true})
	require.NoError(b, err)
	defer m.Free()
	const n, state = 450, 380
	prompt := func(it int) []Token { // a different prompt every iteration
		out := make([]Token, n)
		for i := range out {
			out[i] = Token(300 + (i*7919+it*13)%min(20000, m.VocabSize()-300))
		}
		return out
	}
	add := func(bt *Batch, toks []Token, fused bool) {
		for i, tk := range toks {
			seqs := []int{0}
			switch {
			case fused && i < state:
				seqs = []int{0, 16}
			case fused:
				seqs = []int{16}
			}
			require.NoError(b, bt.Add(tk, i, seqs, i == len(toks)-1))
		}
	}
	one := ContextParams{NCtx: 8192, NBatch: 2048, NUBatch: 512, NSeqMax: 1, Threads: 2, FlashAttention: 1}
	verdict := ContextParams{NCtx: 8192, NBatch: 2048, NUBatch: 512, NSeqMax: 128, Threads: 2, KVUnified: true, FlashAttention: 1}
	layouts := []struct {
		name     string
		p        ContextParams
		fused    bool
		resident int
	}{
		{"one-sequence-context", one, false, 0},
		{"verdict-context", verdict, false, 0},
		{"verdict-fused", verdict, true, 0},
		{"verdict-fused-1024-resident", verdict, true, 1024},
	}
	ctxs := make([]*Context, len(layouts))
	for i, l := range layouts {
		c, err := NewContext(m, l.p)
		require.NoError(b, err)
		defer c.Free()
		ctxs[i] = c
	}
	bt, err := NewBatch(2048, 2)
	require.NoError(b, err)
	defer bt.Free()
	ms := make([][]float64, len(layouts))
	it := 0
	for b.Loop() {
		for i, l := range layouts {
			c := ctxs[i]
			c.Clear()
			for done := 0; done < l.resident; done += 512 {
				bt.Clear()
				for k := 0; k < 512; k++ {
					require.NoError(b, bt.Add(Token(400+k), done+k, []int{5}, false))
				}
				require.NoError(b, c.Decode(bt))
			}
			bt.Clear()
			add(bt, prompt(it), l.fused)
			t0 := time.Now()
			require.NoError(b, c.Decode(bt))
			ms[i] = append(ms[i], float64(time.Since(t0).Microseconds())/1000)
		}
		it++
	}
	for i, l := range layouts {
		slices.Sort(ms[i])
		b.ReportMetric(ms[i][(len(ms[i])-1)/2], "ms/"+l.name)
	}
}

// BenchmarkSharedStateSchedules measures what the kernels allow on a
// shared state, so that a scheduler's share of the peer benchmark's token
// bound can be told apart from the cost of the attention itself. One
// state of S tokens with k question suffixes of Q tokens each
// (VERDICT_BENCH_SHAPE="SxQxk", default 1800x90x21: W1's shape-777) is
// decoded, interleaved within every iteration, as:
//
//   - fresh: one prompt of S+Q tokens, the bound's rate (a first prompt
//     prefilled from nothing);
//   - schedule-N: the state, then the suffixes in branch sequences copied
//     from it, whole suffixes in calls of at most N tokens, each call's
//     branches removed after it (what an ideal scheduler does, nothing
//     else: no tokenization, no logits read);
//   - suffixes-alone-N: the same suffix calls with no state cells to
//     attend over (the weights' share of their cost);
//   - fused: verdict's own schedule for one state (see below);
//   - tails-N: the suffix calls of schedule-N alone, the state decoded
//     untimed before them (N = Q: one suffix a call, as a server with one
//     prompt-cached slot decodes them).
//
// VERDICT_BENCH_ONLY (a regular expression) keeps only the modes it
// matches, and fresh.
//
// Each reports its median microseconds per token; bound-share-N (fresh
// over schedule-N, per token) is the fraction of the token bound that a perfect scheduler reaches on this
// shape, and the suffixes-alone rows show how much of the gap is the
// suffixes attending over the state.
//
//	VERDICT_BENCH_MODEL=.verdict/models/verdict-synth-small-seed1.gguf \
//	  go test -run '^$' -bench SharedStateSchedules -benchtime 3x ./engine/llamacpp/internal/llama
func BenchmarkSharedStateSchedules(b *testing.B) {
	path := os.Getenv("VERDICT_BENCH_MODEL")
	if path == "" {
		path = tinyPath
	}
	S, Q, k := 1800, 90, 21
	if v := os.Getenv("VERDICT_BENCH_SHAPE"); v != "" {
		_, err := fmt.Sscanf(v, "%dx%dx%d", &S, &Q, &k)
		require.NoError(b, err, "VERDICT_BENCH_SHAPE wants SxQxk, e.g. 1800x90x21")
		require.True(b, S > 0 && Q > 0 && k > 0 && k < 127, "VERDICT_BENCH_SHAPE: S, Q > 0 and 0 < k < 127")
	}
	m, err := LoadModel(path, ModelParams{UseMmap: true})
	require.NoError(b, err)
	defer m.Free()
	tok := func(it, i int) Token { // different tokens every iteration
		return Token(300 + (i*7919+it*13)%min(20000, m.VocabSize()-300))
	}
	// VERDICT_BENCH_KV lists the KV cache types to run every mode with
	// (f16, f32; default f16), interleaved like the modes.
	kvTypes := []KVType{KVF16}
	if v := os.Getenv("VERDICT_BENCH_KV"); v != "" {
		kvTypes = nil
		for _, name := range strings.Split(v, ",") {
			switch name {
			case "f16":
				kvTypes = append(kvTypes, KVF16)
			case "f32":
				kvTypes = append(kvTypes, KVF32)
			default:
				b.Fatalf("VERDICT_BENCH_KV: %q is not f16 or f32", name)
			}
		}
	}
	ctxs := make([]*Context, len(kvTypes))
	for i, kt := range kvTypes {
		ctxs[i], err = NewContext(m, ContextParams{NCtx: 8192, NBatch: 2048, NUBatch: 512, NSeqMax: 128, Threads: 2, KVUnified: true, FlashAttention: 1, KVType: kt})
		require.NoError(b, err)
		defer ctxs[i].Free()
	}
	var c *Context // the context of the mode running
	bt, err := NewBatch(2048, 1)
	require.NoError(b, err)
	defer bt.Free()

	// decodeRun decodes toks of sequence seq from position p0 in calls of
	// at most 2048 tokens (the context's batch), logits at the last.
	decodeRun := func(toks []Token, p0, seq int) {
		for done := 0; done < len(toks); {
			bt.Clear()
			n := min(len(toks)-done, 2048)
			for i := 0; i < n; i++ {
				require.NoError(b, bt.Add(toks[done+i], p0+done+i, []int{seq}, done+i == len(toks)-1))
			}
			require.NoError(b, c.Decode(bt))
			done += n
		}
	}
	// suffixes decodes the k suffixes, branch j in sequence j+1 from
	// position S (0 without the state: llama.cpp wants a sequence's
	// positions to follow on), in calls of at most budget tokens, and
	// removes each call's branches after it.
	suffixes := func(it, budget int, withState bool) {
		for j := 0; j < k; {
			bt.Clear()
			first := j
			p0 := 0
			if withState {
				p0 = S
			}
			for ; j < k && (j == first || (j-first+1)*Q <= budget); j++ {
				if withState {
					require.NoError(b, c.SeqCopy(0, j+1, -1, -1))
				}
				for i := 0; i < Q; i++ {
					require.NoError(b, bt.Add(tok(it, S+j*Q+i), p0+i, []int{j + 1}, i == Q-1))
				}
			}
			require.NoError(b, c.Decode(bt))
			for s := first; s < j; s++ {
				require.NoError(b, c.SeqRemove(s+1, -1, -1))
			}
		}
	}
	type mode struct {
		name   string
		tokens int
		setup  func(it int) // untimed, before run
		run    func(it int)
	}
	state := func(it int) []Token {
		out := make([]Token, S)
		for i := range out {
			out[i] = tok(it, i)
		}
		return out
	}
	modes := []mode{{"fresh", S + Q, nil, func(it int) {
		toks := state(it)
		for i := 0; i < Q; i++ {
			toks = append(toks, tok(it, S+i))
		}
		decodeRun(toks, 0, 0)
	}}}
	for _, budget := range []int{Q, 256, 512, 1024, 2048} {
		modes = append(modes, mode{fmt.Sprintf("tails-%d", budget), k * Q, func(it int) { decodeRun(state(it), 0, 0) }, func(it int) {
			suffixes(it, budget, true)
		}})
		if budget != 512 && budget != 2048 {
			continue
		}
		modes = append(modes,
			mode{fmt.Sprintf("schedule-%d", budget), S + k*Q, nil, func(it int) {
				decodeRun(state(it), 0, 0)
				suffixes(it, budget, true)
			}},
			mode{fmt.Sprintf("suffixes-alone-%d", budget), k * Q, nil, func(it int) {
				suffixes(it, budget, false)
			}})
	}
	// fused: verdict's schedule for one state. The state's tokens go into
	// the cache sequence and all k branches at once (each token in k+1
	// sequences), the first suffixes fill the rest of that call, and the
	// remaining suffixes follow in calls of 2048 tokens.
	fb, err := NewBatch(2048, k+1)
	require.NoError(b, err)
	defer fb.Free()
	all := make([]int, k+1)
	for i := range all {
		all[i] = i
	}
	modes = append(modes, mode{"fused", S + k*Q, nil, func(it int) {
		fb.Clear()
		flush := func() {
			require.NoError(b, c.Decode(fb))
			fb.Clear()
		}
		for i := 0; i < S; i++ {
			if fb.Len() == fb.Cap() {
				flush()
			}
			require.NoError(b, fb.Add(tok(it, i), i, all, false))
		}
		for j := 0; j < k; j++ {
			for i := 0; i < Q; i++ {
				if fb.Len() == fb.Cap() {
					flush()
				}
				require.NoError(b, fb.Add(tok(it, S+j*Q+i), S+i, []int{j + 1}, i == Q-1))
			}
		}
		flush()
	}})
	if re := os.Getenv("VERDICT_BENCH_ONLY"); re != "" {
		keep := regexp.MustCompile(re)
		modes = slices.DeleteFunc(modes, func(md mode) bool { return md.name != "fresh" && !keep.MatchString(md.name) })
	}
	// Every mode with every KV type, named mode/type when there are several.
	type run struct {
		mode
		kv    int
		fresh int // the index of the same type's fresh run
	}
	var runs []run
	for ki, kt := range kvTypes {
		first := len(runs)
		for _, md := range modes {
			if len(kvTypes) > 1 {
				md.name += "/" + kt.String()
			}
			runs = append(runs, run{md, ki, first})
		}
	}
	us := make([][]float64, len(runs))
	it := 0
	for b.Loop() {
		for i, r := range runs {
			c = ctxs[r.kv]
			c.Clear()
			if r.setup != nil {
				r.setup(it*len(runs) + i)
			}
			t0 := time.Now()
			r.run(it*len(runs) + i)
			us[i] = append(us[i], float64(time.Since(t0).Microseconds())/float64(r.tokens))
		}
		it++
	}
	med := make([]float64, len(runs))
	for i, r := range runs {
		slices.Sort(us[i])
		med[i] = us[i][(len(us[i])-1)/2]
		b.ReportMetric(med[i], "us/tok-"+r.name)
	}
	for i, r := range runs {
		if strings.HasPrefix(r.name, "schedule-") || strings.HasPrefix(r.name, "fused") {
			b.ReportMetric(med[r.fresh]/med[i], "bound-share-"+strings.TrimPrefix(r.name, "schedule-"))
		}
	}
}
