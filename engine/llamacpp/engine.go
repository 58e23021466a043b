//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/hugepages"
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

	jobs      chan *job
	pending   atomic.Int64
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool
	// life is held (read) by callers from the closed check through
	// tokenizing and enqueueing, and (write) by Close before it stops the
	// loop and frees the model: no caller tokenizes with a freed model or
	// enqueues after the loop drained.
	life sync.RWMutex

	stats struct {
		decisions, batches, submitted, evaluated, hits, misses, saved, decodeNs, busy atomic.Int64
		hostBytes, moveNs                                                             atomic.Int64
	}

	// Owned by the decode loop.
	batch *llama.Batch
	cache *prefixCache
	free  []int // free branch sequence ids

	// beforeDecodeFunc, when set (by tests), runs in the decode loop
	// before every llama_decode call; an error it returns stands for the
	// call's own, and the call is not made.
	beforeDecodeFunc func() error
	// queuedFunc, when set (by tests), runs in Score once the caller's
	// job waits in the decode loop's queue.
	queuedFunc func()
	// jobDoneFunc, when set (by tests), runs in the decode loop when a
	// job's last decision is finished, just before its caller is
	// answered.
	jobDoneFunc func(*job)
}

type job struct {
	ctx      context.Context
	items    []*item
	done     chan struct{}
	enqueued time.Time
	left     int // decisions not finished yet (decode loop)
}

// item is one decision on its way through the engine.
type item struct {
	d                 *decision.Decision
	prompt            engine.Prompt
	head              []llama.Token   // BOS + template + instructions + state (+ what every tail of its sub-round starts with: sharedHead)
	tail              []llama.Token   // question, options, cue, assistant turn
	statePrefixTokens int             // len(head) as prepared: the state prefix
	labels            [][]llama.Token // answer-slot tokens per option
	multi             bool            // some label needs more than one token
	err               error
	tokenize          time.Duration
	queued            time.Duration

	// decode-loop state
	job *job
	ctx context.Context // the caller's; when done, the item stops
	attempt
}

// attempt is an item's progress through one try of its sub-round. A
// failed try is retried from scratch on a clean KV memory: the retry
// resets all of it at once (it.attempt = attempt{}, resetAttempts), so a
// field added here is reset with the rest. What outlives a try (the
// item's error, its head and tail) stays in item.
type attempt struct {
	seq       int           // branch sequence, when hasSeq
	hasSeq    bool          // seq is taken
	cursor    int           // tail tokens already in the KV cache
	evaluated int           // tokens decoded for this decision
	logp      []float64     // per option: summed log-probability (multi) or logit (single)
	doneScore bool          // logp is complete: the decision is scored
	decode    time.Duration // from the start of its branches to doneScore
}

// New loads the model, checks its pin and starts the decode loop.
func New(opts Options) (*Engine, error) {
	given := opts
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	info, err := gguf.Verify(opts.ModelPath, opts.SHA256)
	if err != nil {
		return nil, err
	}
	if err := llama.CheckPin(); err != nil {
		return nil, err
	}
	if err := CheckArchitecture(info.Architecture); err != nil {
		return nil, err
	}
	build := Info()
	hugeBefore, _ := hugepages.AnonHuge(0)
	m, err := llama.LoadModel(opts.ModelPath, llama.ModelParams{GPULayers: opts.GPULayers, UseMmap: opts.Mmap == "on"})
	if err != nil {
		return nil, err
	}
	// What of the weights read into memory went on huge pages (0 for a
	// mapped file), for the log line below.
	hugeAfter, _ := hugepages.AnonHuge(0)
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
		}
		given.recurrentModel = true
		opts = given.withDefaults()
		if err := opts.validate(); err != nil {
			m.Free()
			return nil, err
		}
	}
	lctx, err := llama.NewContext(m, llama.ContextParams{NCtx: opts.ContextSize, NBatch: opts.BatchSize, NUBatch: opts.UBatchSize,
		NSeqMax: opts.MaxSequences, Threads: opts.Threads, KVUnified: true, FlashAttention: fa(opts.FlashAttention)})
	if err != nil {
		m.Free()
		return nil, err
	}
	// A head token may go into its cache sequence and the branches fused
	// with it (see prefill).
	batch, err := llama.NewBatch(lctx.NBatch(), 1+maxFused)
	if err != nil {
		lctx.Free()
		m.Free()
		return nil, err
	}
	e := &Engine{
		opts: opts, model: m, lctx: lctx, batch: batch, recurrent: recurrent,
		jobs: make(chan *job, opts.MaxPending), quit: make(chan struct{}), done: make(chan struct{}),
		cache: newPrefixCache(lctx, opts.PrefixCacheSlots, opts.PrefixCacheTokens, recurrent, opts.PrefixCacheStore == "host", slog.Default()),
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
		LlamaCpp: build.LlamaCpp, Backend: backendFor(build.Devices, opts.GPULayers), Memory: memory,
	}
	for s := opts.PrefixCacheSlots; s < lctx.NSeqMax(); s++ {
		e.free = append(e.free, s)
	}
	slog.Info("llamacpp: model loaded", "file", e.identity.File, "sha256", info.SHA256, "arch", arch,
		"quant", info.Quantization, "chat", e.family, "memory", memory, "llama_cpp", build.LlamaCpp,
		"backend", e.identity.Backend, "devices", deviceNames(build.Devices), "cpu_features", build.CPUFeatures,
		"n_ctx", lctx.NCtx(), "n_batch", lctx.NBatch(), "n_seq_max", lctx.NSeqMax(), "seq_state_bytes", stateBytes,
		"threads", opts.Threads, "flash_attn", opts.FlashAttention, "mmap", opts.Mmap, "weights_hugepages_mib", max(0, hugeAfter-hugeBefore)>>20,
		"prefix_cache_tokens", opts.PrefixCacheTokens, "prefix_cache_store", opts.PrefixCacheStore, "branch_batch", opts.BranchBatchTokens, "head_batch", opts.HeadBatchTokens)
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
		CacheHostBytes: s.hostBytes.Load(), CacheMoveNanos: s.moveNs.Load(),
	}
}

// Close stops the decode loop and frees the context and model. It does not
// wait for work in flight: the decode call running is the last, and every
// decision not scored by then, waiting or in flight, is answered with
// engine.ErrClosed.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
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
	if err := context.Cause(ctx); err != nil {
		return nil, err // the caller gave up already: nothing is admitted
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
	if e.queuedFunc != nil {
		e.queuedFunc()
	}
	e.life.RUnlock()
	select {
	case <-j.done:
	case <-ctx.Done():
		// The loop skips the job's remaining items and releases its
		// admission; nothing of it is read here any more.
		return nil, context.Cause(ctx)
	}
	if err := context.Cause(ctx); err != nil {
		// Both were ready: the loop finished the job because the caller
		// gave up (its decisions stopped), so the cause is the answer.
		return nil, err
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
	it.head, it.statePrefixTokens = head, len(head)
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
		it.err = fmt.Errorf("%w: the prompt needs %d tokens, the context window holds %d", engine.ErrContextFull, need, e.lctx.NCtx())
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
		return engine.ErrorResult(it.d, it.err) // the code and field paths come from decision.CodeOf
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
	r.Tokens = &decision.Tokens{Input: len(it.head) + len(it.tail), StatePrefix: it.statePrefixTokens, Evaluated: it.evaluated}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.Timing = &decision.Timing{Tokenize: ms(it.tokenize), Queue: ms(it.queued), Decode: ms(it.decode), Total: ms(total)}
	return r
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
