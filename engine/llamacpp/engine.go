//go:build llamacpp

package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
	"github.com/verdict-dev/verdict/model"
)

// Engine scores decisions with one llama.cpp context owned by one
// goroutine (the decode loop). Score is safe for concurrent use.
type Engine struct {
	opts     Options
	model    *llama.Model
	lctx     *llama.Context
	identity decision.ModelIdentity
	family   engine.ChatFamily
	bos      []llama.Token
	// recurrent: the model keeps a recurrent state per sequence (a hybrid
	// such as qwen35, or a pure recurrent model). Such a state exists only
	// at a sequence's last position: a cached prefix can be reused only
	// whole, never cut shorter.
	recurrent bool

	jobs    chan *job
	pending atomic.Int64
	quit    chan struct{}
	done    chan struct{}
	closeMu sync.Once
	closed  atomic.Bool
	// life is held (read) by callers from the closed check through
	// tokenizing and enqueueing, and (write) by Close before it stops the
	// loop and frees the model: no caller tokenizes with a freed model or
	// enqueues after the loop drained.
	life sync.RWMutex

	stats struct {
		decisions, batches, submitted, evaluated, hits, misses, saved, decodeNs, busy atomic.Int64
	}

	// Owned by the decode loop.
	batch *llama.Batch
	cache []*cacheEntry
	round int64
	free  []int // free branch sequence ids
}

// cacheEntry is a state prefix resident in the KV cache in sequence seq,
// at positions [0, len(tokens)).
type cacheEntry struct {
	seq    int
	tokens []llama.Token
	used   int64 // round that last used it
	pinned bool  // in use by the current sub-round
}

type job struct {
	ctx      context.Context
	items    []*item
	done     chan struct{}
	enqueued time.Time
}

// item is one decision on its way through the engine.
type item struct {
	d        *decision.Decision
	prompt   engine.Prompt
	head     []llama.Token   // BOS + template + instructions + state
	tail     []llama.Token   // question, options, cue, assistant turn
	labels   [][]llama.Token // answer-slot tokens per option
	multi    bool            // some label needs more than one token
	err      error
	tokenize time.Duration
	queued   time.Duration
	decode   time.Duration

	// decode-loop state
	seq       int       // branch sequence
	hasSeq    bool      // seq is taken
	cursor    int       // tail tokens already in the KV cache
	evaluated int       // tokens decoded for this decision
	logp      []float64 // per option: summed log-probability (multi) or logit (single)
	doneScore bool
	started   time.Time
}

// New loads the model, checks its pin and starts the decode loop.
func New(opts Options) (*Engine, error) {
	given := opts
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	info, err := model.Verify(opts.ModelPath, opts.SHA256)
	if err != nil {
		return nil, err
	}
	if err := CheckArchitecture(Route, info.Architecture); err != nil {
		return nil, err
	}
	build := Info()
	m, err := llama.LoadModel(opts.ModelPath, llama.ModelParams{GPULayers: opts.GPULayers, UseMmap: !opts.NoMmap})
	if err != nil {
		return nil, err
	}
	memory := "kv"
	switch {
	case m.IsHybrid():
		memory = "hybrid"
	case m.IsRecurrent():
		memory = "recurrent"
	}
	recurrent := memory != "kv"
	var stateBytes int
	if recurrent {
		// Every sequence id owns one recurrent state: size n_seq_max from
		// the measured state of one sequence, unless it was given.
		if stateBytes, err = measureSeqState(m, opts); err != nil {
			m.Free()
			return nil, err
		}
		if given.MaxSequences == 0 {
			given.MaxSequences = sequencesFor(stateBytes, opts.RecurrentMemory)
			opts = given.withDefaults()
			if err := opts.validate(); err != nil {
				m.Free()
				return nil, err
			}
		}
	}
	lctx, err := llama.NewContext(m, llama.ContextParams{NCtx: opts.ContextSize, NBatch: opts.BatchSize, NUBatch: opts.UBatchSize,
		NSeqMax: opts.MaxSequences, Threads: opts.Threads, KVUnified: true, FlashAttention: fa(opts.FlashAttention)})
	if err != nil {
		m.Free()
		return nil, err
	}
	batch, err := llama.NewBatch(lctx.NBatch(), 1)
	if err != nil {
		lctx.Free()
		m.Free()
		return nil, err
	}
	e := &Engine{
		opts: opts, model: m, lctx: lctx, batch: batch, recurrent: recurrent,
		jobs: make(chan *job, opts.MaxPending), quit: make(chan struct{}), done: make(chan struct{}),
	}
	e.family = engine.DetectChat(m.ChatTemplate())
	if !e.specialsOK(engine.ChatSpecials(e.family)) {
		slog.Warn("llamacpp: chat template markers are not control tokens of this vocabulary; using plain prompts", "family", e.family)
		e.family = engine.ChatPlain
	}
	if m.AddBOS() {
		if e.bos, err = m.Tokenize("", true, false); err != nil {
			e.Close()
			return nil, err
		}
	}
	arch, _ := m.Meta("general.architecture")
	name, _ := m.Meta("general.name")
	e.identity = decision.ModelIdentity{
		File: filepath.Base(opts.ModelPath), SHA256: info.SHA256, Name: name,
		Architecture: arch, Quantization: info.Quantization, ChatTemplate: string(e.family),
		Route: build.Route, LlamaCpp: build.LlamaCpp, Backend: backendFor(build.Devices, opts.GPULayers), Memory: memory,
	}
	for s := opts.PrefixCacheSlots; s < lctx.NSeqMax(); s++ {
		e.free = append(e.free, s)
	}
	slog.Info("llamacpp: model loaded", "file", e.identity.File, "sha256", info.SHA256, "arch", arch,
		"quant", info.Quantization, "chat", e.family, "memory", memory, "route", build.Route, "llama_cpp", build.LlamaCpp,
		"backend", e.identity.Backend, "devices", deviceNames(build.Devices), "cpu_features", build.CPUFeatures,
		"n_ctx", lctx.NCtx(), "n_batch", lctx.NBatch(), "n_seq_max", lctx.NSeqMax(), "seq_state_bytes", stateBytes,
		"threads", opts.Threads, "flash_attn", opts.FlashAttention,
		"prefix_cache_tokens", opts.PrefixCacheTokens, "branch_batch", opts.BranchBatchTokens)
	go e.loop()
	return e, nil
}

// measureSeqState decodes one token in a throw-away one-sequence context
// and returns the bytes llama.cpp holds for that sequence: for recurrent
// layers, the whole per-sequence state (its size does not grow with
// tokens).
func measureSeqState(m *llama.Model, opts Options) (int, error) {
	c, err := llama.NewContext(m, llama.ContextParams{NCtx: 256, NBatch: 64, NUBatch: 64, NSeqMax: 1, Threads: opts.Threads, KVUnified: true, FlashAttention: fa(opts.FlashAttention)})
	if err != nil {
		return 0, fmt.Errorf("llamacpp: measure sequence state: %w", err)
	}
	defer c.Free()
	b, err := llama.NewBatch(1, 1)
	if err != nil {
		return 0, err
	}
	defer b.Free()
	if err := b.Add(0, 0, []int{0}, true); err != nil {
		return 0, err
	}
	if err := c.Decode(b); err != nil {
		return 0, fmt.Errorf("llamacpp: measure sequence state: %w", err)
	}
	return c.SeqStateSize(0)
}

// sequencesFor is the n_seq_max whose recurrent states fit budget bytes:
// at least 8 (a prefix and a few branches), at most 128.
func sequencesFor(stateBytes int, budget int64) int {
	if stateBytes <= 0 {
		return 128
	}
	return int(min(max(budget/int64(stateBytes), 8), 128))
}

// backendFor names the device the layers run on: the first GPU when layers
// are offloaded and one is present, else the CPU.
func backendFor(devs []Device, gpuLayers int) string {
	if gpuLayers != 0 {
		for _, d := range devs {
			if d.Kind == "gpu" {
				return d.Name
			}
		}
	}
	return "CPU"
}

func deviceNames(devs []Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name + " (" + d.Description + ")"
	}
	return out
}

// specialsOK reports whether every marker tokenizes to one control token
// (or, for markers inside a turn such as Gemma 4's thought channel, one
// user-defined token).
func (e *Engine) specialsOK(specials []string) bool {
	for _, s := range specials {
		toks, err := e.model.Tokenize(s, false, true)
		if err != nil || len(toks) != 1 || !(e.model.IsControl(toks[0]) || e.model.IsUserDefined(toks[0])) {
			return false
		}
	}
	return true
}

// Identity names the loaded model.
func (e *Engine) Identity() decision.ModelIdentity { return e.identity }

// TokenCount is the number of tokens text takes in the loaded model's
// vocabulary (no BOS, control-token text left as text).
func (e *Engine) TokenCount(text string) (int, error) {
	e.life.RLock()
	defer e.life.RUnlock()
	if e.closed.Load() {
		return 0, engine.ErrClosed
	}
	toks, err := e.model.Tokenize(text, false, false)
	return len(toks), err
}

// Family is the chat family prompts are wrapped in.
func (e *Engine) Family() engine.ChatFamily { return e.family }

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	s := &e.stats
	return Stats{
		Decisions: s.decisions.Load(), Batches: s.batches.Load(), TokensSubmitted: s.submitted.Load(),
		TokensEvaluated: s.evaluated.Load(), PrefixHits: s.hits.Load(), PrefixMisses: s.misses.Load(),
		TokensSaved: s.saved.Load(), DecodeNanos: s.decodeNs.Load(), Pending: e.pending.Load(), Busy: s.busy.Load(),
	}
}

// Close stops the decode loop (failing what waits with engine.ErrClosed)
// and frees the context and model.
func (e *Engine) Close() error {
	e.closeMu.Do(func() {
		e.life.Lock()
		e.closed.Store(true)
		e.life.Unlock()
		close(e.quit)
		<-e.done
		e.batch.Free()
		e.lctx.Free()
		e.model.Free()
	})
	return nil
}

// Score scores decisions; see engine.Scorer. Callers render and tokenize
// their own decisions; the decode loop batches everything waiting.
func (e *Engine) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	e.life.RLock()
	if e.closed.Load() {
		e.life.RUnlock()
		return nil, engine.ErrClosed
	}
	start := time.Now()
	n := int64(len(ds))
	// A call larger than the whole bound is still admitted when the engine
	// is idle, alone, so that it can never be refused forever.
	if p := e.pending.Add(n); p > int64(e.opts.MaxPending) && p != n {
		e.pending.Add(-n)
		e.stats.busy.Add(1)
		e.life.RUnlock()
		return nil, engine.ErrBusy
	}
	items := make([]*item, len(ds))
	heads := map[string][]llama.Token{}
	for i := range ds {
		items[i] = e.prepare(&ds[i], heads)
	}
	j := &job{ctx: ctx, items: items, done: make(chan struct{}), enqueued: time.Now()}
	// Never blocks: the channel holds MaxPending jobs, and admission keeps
	// at most that many decisions (so jobs) waiting; and the loop is still
	// running, since Close waits for life before stopping it.
	e.jobs <- j
	e.life.RUnlock()
	select {
	case <-j.done:
	case <-ctx.Done():
		// The loop skips the job's remaining items and releases its
		// admission; nothing of it is read here any more.
		return nil, context.Cause(ctx)
	}
	total := time.Since(start)
	out := make([]decision.Result, len(items))
	for i, it := range items {
		out[i] = e.result(it, total)
	}
	return out, nil
}

// prepare renders and tokenizes one decision and finds its answer slots.
// Problems are recorded in the item, never returned: one bad decision does
// not fail the others.
func (e *Engine) prepare(d *decision.Decision, heads map[string][]llama.Token) *item {
	it := &item{d: d}
	t0 := time.Now()
	defer func() { it.tokenize = time.Since(t0) }()
	if err := d.Validate(decision.StructuralLimits(), ""); err != nil {
		it.err = err
		return it
	}
	it.prompt = engine.Render(d, e.family)
	segs := it.prompt.Segments
	split, off := 0, 0
	for split < len(segs) && off < it.prompt.StateEnd {
		off += len(segs[split].Text)
		split++
	}
	key := string(d.State.Canonical())
	head, ok := heads[key]
	if !ok {
		head = append([]llama.Token(nil), e.bos...)
		for _, s := range segs[:split] {
			toks, err := e.model.Tokenize(s.Text, false, s.Special)
			if err != nil {
				it.err = err
				return it
			}
			head = append(head, toks...)
		}
		heads[key] = head
	}
	it.head = head
	var last []llama.Token
	var lastText string
	for _, s := range segs[split:] {
		toks, err := e.model.Tokenize(s.Text, false, s.Special)
		if err != nil {
			it.err = err
			return it
		}
		it.tail = append(it.tail, toks...)
		if !s.Special {
			last, lastText = toks, s.Text
		} else {
			last, lastText = nil, ""
		}
	}
	if it.labels, it.err = e.slots(it.prompt, last, lastText); it.err != nil {
		return it
	}
	longest := 0
	for _, l := range it.labels {
		longest = max(longest, len(l))
		it.multi = it.multi || len(l) > 1
	}
	if need := len(it.head) + len(it.tail) + longest; need > e.lctx.NCtx() {
		it.err = fmt.Errorf("%w: prompt needs %d tokens, which exceeds the maximum context length of %d tokens", engine.ErrContextFull, need, e.lctx.NCtx())
	}
	return it
}

// slots finds each label's token sequence as the tokenizer produces it
// right after the prompt: tokens(lastText+label) minus tokens(lastText).
// The preferred form (bare for chat turns, " A" after "Answer:") is tried
// first, then the other. Single-token slots are verified by round trip:
// the token's text, less leading spaces, must be the label.
func (e *Engine) slots(p engine.Prompt, last []llama.Token, lastText string) ([][]llama.Token, error) {
	forms := []string{" ", ""}
	if p.BareLabel {
		forms = []string{"", " "}
	}
	var lastErr error
	for _, sp := range forms {
		out := make([][]llama.Token, len(p.Labels))
		ok := true
		for i, l := range p.Labels {
			toks, err := e.model.Tokenize(lastText+sp+l, false, false)
			if err != nil {
				return nil, err
			}
			if len(toks) <= len(last) || !equalTokens(toks[:len(last)], last) {
				ok, lastErr = false, fmt.Errorf("%w: label %q merges with the prompt's last token", engine.ErrUnsupported, l)
				break
			}
			out[i] = toks[len(last):]
			if len(out[i]) == 1 {
				piece, err := e.model.Piece(out[i][0], false)
				if err != nil || strings.TrimLeft(piece, " ") != l {
					ok, lastErr = false, fmt.Errorf("%w: label %q does not round-trip (token %d is %q)", engine.ErrUnsupported, l, out[i][0], piece)
					break
				}
			}
		}
		if ok {
			return out, nil
		}
	}
	return nil, lastErr
}

func equalTokens(a, b []llama.Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// result builds the public result of an item.
func (e *Engine) result(it *item, total time.Duration) decision.Result {
	if it.err == nil && !it.doneScore {
		it.err = fmt.Errorf("%w: decision was not scored", engine.ErrClosed)
	}
	if it.err != nil {
		r := engine.ErrorResult(it.d, it.err)
		var ve *decision.ValidationError
		if errors.As(it.err, &ve) {
			r.Error.Code = "invalid"
			r.Error.Fields = ve.Errors
		}
		return r
	}
	var r decision.Result
	engine.Readout(&r, it.d, it.logp, e.opts.Temperature)
	id := e.identity
	r.Model = &id
	r.PromptVersion = it.prompt.Version
	r.PromptSHA256 = it.prompt.SHA256()
	r.Labels = it.prompt.Labels
	if it.multi {
		r.Readout = "multi-token answer slots: each option's label tokens scored by extending branches of the prompt; option_logits are summed label log-probabilities; probabilities = softmax over the options; no generated tokens"
	} else {
		r.Readout = "last-position logits restricted to single-token answer slots (labels verified against the vocabulary); probabilities = softmax over the options; no generated tokens"
	}
	r.Tokens = &decision.Tokens{Input: len(it.head) + len(it.tail), StatePrefix: len(it.head), Evaluated: it.evaluated}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.Timing = &decision.Timing{Tokenize: ms(it.tokenize), Queue: ms(it.queued), Decode: ms(it.decode), Total: ms(total)}
	return r
}

// loop is the decode loop: the only goroutine that touches the context.
func (e *Engine) loop() {
	defer close(e.done)
	for {
		select {
		case <-e.quit:
			e.drainClosed()
			return
		case j := <-e.jobs:
			round := []*job{j}
			n := len(j.items)
		more:
			for n < e.opts.MaxRoundDecisions {
				select {
				case j2 := <-e.jobs:
					round = append(round, j2)
					n += len(j2.items)
				default:
					break more
				}
			}
			e.runRoundSafe(round)
			for _, j := range round {
				e.pending.Add(-int64(len(j.items)))
				close(j.done)
			}
		}
	}
}

func (e *Engine) drainClosed() {
	for {
		select {
		case j := <-e.jobs:
			for _, it := range j.items {
				if it.err == nil {
					it.err = engine.ErrClosed
				}
			}
			e.pending.Add(-int64(len(j.items)))
			close(j.done)
		default:
			return
		}
	}
}

// runRoundSafe runs a round, turning a panic into per-decision errors and
// a reset of the KV state so that the loop goes on.
func (e *Engine) runRoundSafe(round []*job) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("llamacpp: panic in decode loop", "panic", p, "stack", string(debug.Stack()))
			for _, j := range round {
				for _, it := range j.items {
					if !it.doneScore && it.err == nil {
						it.err = fmt.Errorf("llamacpp: internal error: %v", p)
					}
				}
			}
			e.resetKV()
		}
	}()
	e.runRound(round)
}

// runRound scores every live item of the round: grouped by state prefix,
// in sub-rounds of at most PrefixCacheSlots groups.
func (e *Engine) runRound(round []*job) {
	e.round++
	now := time.Now()
	type group struct {
		head  []llama.Token
		items []*item
	}
	var groups []*group
	byHead := map[string]*group{}
	for _, j := range round {
		for _, it := range j.items {
			it.queued = now.Sub(j.enqueued)
			if it.err != nil {
				continue
			}
			if err := context.Cause(j.ctx); err != nil {
				it.err = err
				continue
			}
			e.stats.submitted.Add(int64(len(it.head) + len(it.tail)))
			k := tokenKey(it.head)
			g, ok := byHead[k]
			if !ok {
				g = &group{head: it.head}
				byHead[k] = g
				groups = append(groups, g)
			}
			g.items = append(g.items, it)
		}
	}
	// Sub-rounds: at most PrefixCacheSlots groups, and heads to prefill
	// within BranchBatchTokens (at least one group), so that the cells
	// every decode attends over stay few.
	slots := e.opts.PrefixCacheSlots
	for start := 0; start < len(groups); {
		end, tokens := start, 0
		for end < len(groups) && end-start < slots && (end == start || tokens+len(groups[end].head) <= e.opts.BranchBatchTokens) {
			tokens += len(groups[end].head)
			end++
		}
		sub := groups[start:end]
		start = end
		heads := make([][]llama.Token, len(sub))
		members := make([][]*item, len(sub))
		for i, g := range sub {
			heads[i], members[i] = g.head, g.items
		}
		if err := e.subRound(heads, members); err != nil {
			// Retry once on a clean KV state, then one decision at a time,
			// so that a failure stays with the decisions that cause it.
			slog.Warn("llamacpp: decode failed; retrying on a clean cache", "err", err)
			e.resetKV()
			e.resetItems(members)
			if err := e.subRound(heads, members); err != nil {
				e.resetKV()
				e.resetItems(members)
				for i := range sub {
					for _, it := range members[i] {
						e.resetKV() // alone on an empty cache: what fits alone is scored
						if err := e.subRound([][]llama.Token{it.head}, [][]*item{{it}}); err != nil {
							it.err = mapDecodeErr(err)
						}
					}
				}
				e.resetKV()
			}
		}
	}
	for _, g := range groups {
		for _, it := range g.items {
			if it.doneScore {
				e.stats.decisions.Add(1)
			}
		}
	}
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
	e.cache = nil
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
// every member's tail in a branch copied from its head, packing branches
// of all groups into shared batches.
func (e *Engine) subRound(heads [][]llama.Token, members [][]*item) error {
	start := time.Now()
	for _, c := range e.cache {
		c.pinned = false
	}
	headSeq := make([]int, len(heads))
	// Phase 1: prefill the heads.
	e.batch.Clear()
	flushPrefill := func() error {
		if e.batch.Len() == 0 {
			return nil
		}
		if err := e.decode(); err != nil {
			return err
		}
		e.batch.Clear()
		return nil
	}
	for gi, head := range heads {
		seq, reuse, err := e.acquire(head, flushPrefill)
		if err != nil {
			return err
		}
		headSeq[gi] = seq
		if reuse > 0 {
			e.stats.hits.Add(1)
		} else {
			e.stats.misses.Add(1)
		}
		e.stats.saved.Add(int64(reuse + len(head)*(len(members[gi])-1)))
		if its := members[gi]; len(its) > 0 {
			its[0].evaluated += len(head) - reuse
		}
		for p := reuse; p < len(head); p++ {
			if e.batch.Len() == e.batch.Cap() {
				if err := e.decode(); err != nil {
					return err
				}
				e.batch.Clear()
			}
			if err := e.batch.Add(head[p], p, []int{seq}, false); err != nil {
				return err
			}
		}
	}
	if e.batch.Len() > 0 {
		if err := e.decode(); err != nil {
			return err
		}
		e.batch.Clear()
	}
	// Phase 2: branches. Items wait in a queue; each gets a branch sequence
	// copied from its head, then its tail tokens, logits on the last one.
	type slot struct {
		it  *item
		idx int // batch index of its last token, or -1
	}
	var queue []*item
	var headOf = map[*item]int{}
	for gi, its := range members {
		for _, it := range its {
			queue = append(queue, it)
			headOf[it] = gi
		}
	}
	var inBatch []slot
	var active []*item // items holding a branch
	flush := func() error {
		if e.batch.Len() == 0 {
			return nil
		}
		if err := e.decode(); err != nil {
			return err
		}
		for _, s := range inBatch {
			if s.idx < 0 {
				continue
			}
			row, err := e.lctx.Logits(s.idx, e.model.VocabSize())
			if err != nil {
				return err
			}
			e.readRoot(s.it, row)
		}
		e.batch.Clear()
		inBatch = inBatch[:0]
		// Free finished single-token branches first, so that multi-token
		// ones have sequences to expand their labels into.
		kept := active[:0]
		var expand []*item
		for _, it := range active {
			switch {
			case it.logp == nil:
				kept = append(kept, it)
				continue
			case it.multi:
				expand = append(expand, it)
				continue
			}
			it.doneScore = true
			it.decode = time.Since(start)
			e.release(it.seq)
			it.hasSeq = false
		}
		for _, it := range expand {
			if err := e.expandLabels(it); err != nil {
				return err
			}
			it.doneScore = true
			it.decode = time.Since(start)
			e.release(it.seq)
			it.hasSeq = false
		}
		active = kept
		return nil
	}
	// With multi-token labels in the sub-round, keep one sequence free for
	// their label branches.
	reserve := 0
	for _, it := range queue {
		if it.multi {
			reserve = 1
			break
		}
	}
	takeBranch := func() (int, bool) {
		if len(e.free) <= reserve {
			return 0, false
		}
		return e.takeSeq()
	}
	for len(queue) > 0 {
		it := queue[0]
		if !it.hasSeq {
			seq, ok := takeBranch()
			if !ok {
				if err := flush(); err != nil {
					return err
				}
				if seq, ok = takeBranch(); !ok {
					return fmt.Errorf("llamacpp: no free sequence for a branch")
				}
			}
			it.seq, it.hasSeq = seq, true
			hs := headSeq[headOf[it]]
			if err := e.lctx.SeqCopy(hs, seq, 0, len(it.head)); err != nil {
				return err
			}
			active = append(active, it)
		}
		room := e.opts.BranchBatchTokens - e.batch.Len()
		n := min(room, len(it.tail)-it.cursor)
		// Keep the cells in use within the context: finish the branches
		// in flight before starting more, rather than overflowing the KV
		// cache and falling back to the slow retry path.
		if room <= 0 || (e.batch.Len() > 0 && len(active) > 1 && e.cellsInUse(active)+n > e.lctx.NCtx()) {
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		for k := 0; k < n; k++ {
			p := it.cursor + k
			lastTok := p == len(it.tail)-1
			if err := e.batch.Add(it.tail[p], len(it.head)+p, []int{it.seq}, lastTok); err != nil {
				return err
			}
			if lastTok {
				inBatch = append(inBatch, slot{it: it, idx: e.batch.Len() - 1})
			}
		}
		it.cursor += n
		it.evaluated += n
		if it.cursor == len(it.tail) {
			queue = queue[1:]
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, c := range e.cache {
		c.pinned = false
	}
	if e.opts.NoPrefixCache {
		for _, c := range e.cache {
			_ = e.lctx.SeqRemove(c.seq, -1, -1)
		}
		e.cache = nil
	}
	return nil
}

// cellsInUse bounds the KV cells held: every cached prefix (shared cells
// counted once per entry, so an over-estimate) plus each active branch's
// own tokens.
func (e *Engine) cellsInUse(active []*item) int {
	n := 0
	for _, c := range e.cache {
		n += len(c.tokens)
	}
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
// by the free sequences and the batch size.
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
	t := time.Now()
	err := e.lctx.Decode(e.batch)
	e.stats.decodeNs.Add(int64(time.Since(t)))
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

// acquire returns the cache sequence that will hold head, and how many of
// its leading tokens are already there. Exact and extending hits reuse
// the entry in place; a partial match copies the common part into a new
// entry; a miss takes a free or least recently used slot. An entry taken
// in this sub-round may still have tokens waiting in the batch: copying
// from it would copy cells that do not exist yet, so flush runs first.
func (e *Engine) acquire(head []llama.Token, flush func() error) (seq, reuse int, err error) {
	var best *cacheEntry
	bestN := 0
	for _, c := range e.cache {
		n := commonPrefix(c.tokens, head)
		if e.recurrent && n < len(c.tokens) {
			// A recurrent state exists only at the entry's last token: an
			// entry is reusable only when all of it is a prefix of head.
			continue
		}
		if n > bestN {
			best, bestN = c, n
		}
	}
	if best != nil && bestN == len(head) {
		// The whole head is cached (perhaps as the start of a longer
		// prefix): branches copy [0, len(head)), so read it in place.
		best.used, best.pinned = e.round, true
		return best.seq, bestN, nil
	}
	if best != nil && bestN == len(best.tokens) && !best.pinned {
		best.tokens = head
		best.used, best.pinned = e.round, true
		e.trimCache(best)
		return best.seq, bestN, nil
	}
	if best != nil && bestN > 0 && !best.pinned && !e.cacheHasRoomBesides(best) {
		// Every other slot is pinned: take best over in place, keeping
		// the common part (nothing reads it this sub-round). A recurrent
		// memory refuses to cut a sequence short; then the entry is
		// emptied and head prefilled whole.
		if err := e.lctx.SeqRemove(best.seq, bestN, -1); err != nil {
			slog.Debug("llamacpp: prefix cache: cannot truncate entry; prefilling it whole", "seq", best.seq, "keep", bestN, "err", err)
			if err := e.lctx.SeqRemove(best.seq, -1, -1); err != nil {
				return 0, 0, err
			}
			bestN = 0
		}
		best.tokens = head
		best.used, best.pinned = e.round, true
		e.trimCache(best)
		return best.seq, bestN, nil
	}
	slot := e.cacheSlot(best)
	ent := &cacheEntry{seq: slot, tokens: head, used: e.round, pinned: true}
	if best != nil && bestN > 0 {
		if best.pinned {
			if err := flush(); err != nil {
				return 0, 0, err
			}
		}
		if err := e.lctx.SeqCopy(best.seq, slot, 0, bestN); err != nil {
			slog.Warn("llamacpp: prefix cache: copy of a cached prefix failed; prefilling it whole", "from", best.seq, "to", slot, "tokens", bestN, "err", err)
			bestN = 0
		}
	} else {
		bestN = 0
	}
	e.cache = append(e.cache, ent)
	e.trimCache(ent)
	return slot, bestN, nil
}

// cacheSlot returns an empty cache sequence id, evicting the least
// recently used unpinned entry when all are taken.
// cacheHasRoomBesides reports whether a slot can be had without evicting
// keep: a free slot, or an unpinned entry other than keep.
func (e *Engine) cacheHasRoomBesides(keep *cacheEntry) bool {
	if len(e.cache) < e.opts.PrefixCacheSlots {
		return true
	}
	for _, c := range e.cache {
		if c != keep && !c.pinned {
			return true
		}
	}
	return false
}

func (e *Engine) cacheSlot(avoid *cacheEntry) int {
	usedSlots := map[int]bool{}
	for _, c := range e.cache {
		usedSlots[c.seq] = true
	}
	for s := 0; s < e.opts.PrefixCacheSlots; s++ {
		if !usedSlots[s] {
			_ = e.lctx.SeqRemove(s, -1, -1)
			return s
		}
	}
	victim := -1
	for i, c := range e.cache {
		if !c.pinned && c != avoid && (victim < 0 || c.used < e.cache[victim].used) {
			victim = i
		}
	}
	if victim < 0 {
		for i, c := range e.cache { // only avoid is left: evict it after all
			if !c.pinned && (victim < 0 || c.used < e.cache[victim].used) {
				victim = i
			}
		}
	}
	if victim < 0 {
		// Cannot happen: sub-rounds hold at most PrefixCacheSlots groups.
		panic("llamacpp: every prefix-cache slot is pinned")
	}
	s := e.cache[victim].seq
	e.cache = append(e.cache[:victim], e.cache[victim+1:]...)
	_ = e.lctx.SeqRemove(s, -1, -1)
	return s
}

// trimCache evicts least recently used entries (never keep, never pinned
// ones) until the cached tokens fit PrefixCacheTokens.
func (e *Engine) trimCache(keep *cacheEntry) {
	for {
		total := 0
		for _, c := range e.cache {
			total += len(c.tokens)
		}
		if total <= e.opts.PrefixCacheTokens {
			return
		}
		victim := -1
		for i, c := range e.cache {
			if c != keep && !c.pinned && (victim < 0 || c.used < e.cache[victim].used) {
				victim = i
			}
		}
		if victim < 0 {
			return
		}
		_ = e.lctx.SeqRemove(e.cache[victim].seq, -1, -1)
		e.cache = append(e.cache[:victim], e.cache[victim+1:]...)
	}
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

// PromptTokens renders and tokenizes d as Score would and returns the
// lengths of its state prefix and of the rest, without scoring it.
func (e *Engine) PromptTokens(d decision.Decision) (prefix, suffix int, err error) {
	e.life.RLock()
	defer e.life.RUnlock()
	if e.closed.Load() {
		return 0, 0, engine.ErrClosed
	}
	it := e.prepare(&d, map[string][]llama.Token{})
	if it.err != nil {
		return 0, 0, it.err
	}
	return len(it.head), len(it.tail), nil
}

// fa maps Options.FlashAttention to llama.cpp's flash_attn_type.
func fa(mode string) int {
	switch mode {
	case "on":
		return 1
	case "off":
		return 0
	}
	return -1
}
