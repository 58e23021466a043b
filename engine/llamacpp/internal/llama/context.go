//go:build cgo

package llama

/*
#include "llama.h"
#include "shim.h"

static struct llama_context_params verdict_context_params(uint32_t n_ctx, uint32_t n_batch, uint32_t n_ubatch,
		uint32_t n_seq_max, int32_t n_threads, bool kv_unified, int flash_attn, int kv_type) {
	struct llama_context_params p = llama_context_default_params();
	p.n_ctx = n_ctx;
	p.n_batch = n_batch;
	p.n_ubatch = n_ubatch;
	p.n_seq_max = n_seq_max;
	p.n_threads = n_threads;
	p.n_threads_batch = n_threads;
	p.embeddings = false;
	p.kv_unified = kv_unified;
	p.flash_attn_type = (enum llama_flash_attn_type)flash_attn;
	p.type_k = (enum ggml_type)kv_type;
	p.type_v = (enum ggml_type)kv_type;
	p.no_perf = true;
	return p;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// ContextParams configure a context.
type ContextParams struct {
	NCtx, NBatch, NUBatch, NSeqMax, Threads int
	KVUnified                               bool
	// FlashAttention is -1 (llama.cpp decides), 0 (off) or 1 (on). The
	// zero value is off.
	FlashAttention int
	// KVType is the element type of the KV cache's keys and values. The
	// zero value is F16, llama.cpp's default.
	KVType KVType
	// PerGraphThreads leaves the context without a persistent thread
	// pool: llama.cpp then starts the CPU threads for every graph. Only
	// for comparisons (tests, benchmarks); it is slower.
	PerGraphThreads bool
}

// KVType is an element type of the KV cache.
type KVType int

const (
	// KVF16 stores keys and values as 16-bit floats (llama.cpp's default).
	KVF16 KVType = iota
	// KVF32 stores them as 32-bit floats: twice the memory, and no
	// conversion when the CPU's attention reads them.
	KVF32
)

func (t KVType) ggml() C.int {
	if t == KVF32 {
		return C.int(C.GGML_TYPE_F32)
	}
	return C.int(C.GGML_TYPE_F16)
}

// String is the type's name as llama.cpp's tools spell it.
func (t KVType) String() string {
	if t == KVF32 {
		return "f32"
	}
	return "f16"
}

// Context is a llama.cpp inference context with its KV memory. It is not
// safe for concurrent use: one goroutine owns it.
type Context struct {
	c       *C.struct_llama_context
	mem     C.llama_memory_t
	pool    *C.struct_ggml_threadpool // the CPU threads, attached to c; nil when none could be made
	nSeqMax int
	nBatch  int
	nCtx    int
	unified bool
	// outputs marks which indices of the last decoded batch have logits.
	outputs []bool
}

// NewContext creates a context for m.
func NewContext(m *Model, p ContextParams) (*Context, error) {
	if m.m == nil {
		return nil, ErrFreed
	}
	if p.NSeqMax < 1 || p.NSeqMax > 256 {
		return nil, fmt.Errorf("llamacpp: n_seq_max %d out of range 1..256", p.NSeqMax)
	}
	cp := C.verdict_context_params(C.uint32_t(p.NCtx), C.uint32_t(p.NBatch), C.uint32_t(p.NUBatch),
		C.uint32_t(p.NSeqMax), C.int32_t(p.Threads), C.bool(p.KVUnified), C.int(p.FlashAttention), p.KVType.ggml())
	c := C.llama_init_from_model(m.m, cp)
	if c == nil {
		return nil, fmt.Errorf("llamacpp: create context (n_ctx %d, n_batch %d, n_seq_max %d) failed", p.NCtx, p.NBatch, p.NSeqMax)
	}
	// A persistent pool, as llama.cpp's own tools attach: without it
	// every micro-batch starts and joins the CPU threads. Without a pool
	// (no CPU backend, or creation failed) llama.cpp's per-graph threads
	// remain, which are correct, only slower.
	var pool *C.struct_ggml_threadpool
	if !p.PerGraphThreads {
		pool = C.verdict_threadpool_new(C.int(p.Threads))
	}
	if pool != nil {
		C.llama_attach_threadpool(c, pool, nil)
	}
	return &Context{c: c, mem: C.llama_get_memory(c), pool: pool, nSeqMax: int(C.llama_n_seq_max(c)),
		nBatch: int(C.llama_n_batch(c)), nCtx: int(C.llama_n_ctx(c)), unified: p.KVUnified}, nil
}

// ThreadPool reports whether a persistent CPU thread pool is attached.
func (c *Context) ThreadPool() bool { return c.pool != nil }

// Free releases the context and then its thread pool. Safe to call twice.
func (c *Context) Free() {
	if c.c != nil {
		C.llama_free(c.c)
		c.c = nil
	}
	if c.pool != nil {
		C.verdict_threadpool_free(c.pool)
		c.pool = nil
	}
}

// NCtx is the context size in tokens.
func (c *Context) NCtx() int { return c.nCtx }

// NBatch is the most tokens one Decode takes.
func (c *Context) NBatch() int { return c.nBatch }

// NSeqMax is the number of sequence ids available.
func (c *Context) NSeqMax() int { return c.nSeqMax }

// Decode evaluates a batch. Return codes become ErrNoKVSlot, ErrAborted,
// ErrInvalidBatch or ErrDecodeFatal.
func (c *Context) Decode(b *Batch) error {
	if c.c == nil || b.freed {
		return ErrFreed
	}
	if b.n == 0 {
		return fmt.Errorf("%w: empty", ErrInvalidBatch)
	}
	if b.n > c.nBatch {
		return fmt.Errorf("%w: %d tokens, n_batch is %d", ErrInvalidBatch, b.n, c.nBatch)
	}
	if b.maxSeq >= c.nSeqMax {
		return fmt.Errorf("%w: sequence id %d, context has %d", ErrInvalidSeq, b.maxSeq, c.nSeqMax)
	}
	b.b.n_tokens = C.int32_t(b.n)
	rc := C.llama_decode(c.c, b.b)
	c.outputs = c.outputs[:0]
	switch {
	case rc == 0:
		c.outputs = append(c.outputs, b.logits[:b.n]...)
		return nil
	case rc == 1:
		return ErrNoKVSlot
	case rc == 2:
		return ErrAborted
	case rc == -1:
		return ErrInvalidBatch
	default:
		return fmt.Errorf("%w: code %d", ErrDecodeFatal, int(rc))
	}
}

// Logits returns the logits of batch index i of the last decoded batch.
// The slice aliases llama.cpp's buffer and is valid until the next Decode;
// copy what you keep.
func (c *Context) Logits(i int, nVocab int) ([]float32, error) {
	if c.c == nil {
		return nil, ErrFreed
	}
	if i < 0 || i >= len(c.outputs) || !c.outputs[i] {
		return nil, fmt.Errorf("%w: index %d", ErrNoLogits, i)
	}
	p := C.llama_get_logits_ith(c.c, C.int32_t(i))
	if p == nil {
		return nil, fmt.Errorf("%w: index %d", ErrNoLogits, i)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), nVocab), nil
}

func (c *Context) checkSeq(ids ...int) error {
	for _, id := range ids {
		if id < 0 || id >= c.nSeqMax {
			return fmt.Errorf("%w: %d not in [0, %d)", ErrInvalidSeq, id, c.nSeqMax)
		}
	}
	return nil
}

// SeqCopy copies the cells of sequence src in positions [p0, p1) to dst
// (p0 < 0: from the start; p1 < 0: to the end). Ids and ranges are checked
// here: llama.cpp asserts (and kills the process) on bad ones, and without
// a unified KV cache only whole-sequence copies are allowed.
func (c *Context) SeqCopy(src, dst, p0, p1 int) error {
	if c.c == nil {
		return ErrFreed
	}
	if err := c.checkSeq(src, dst); err != nil {
		return err
	}
	if src == dst {
		return fmt.Errorf("%w: copy of sequence %d onto itself", ErrInvalidSeq, src)
	}
	if p0 >= 0 && p1 >= 0 && p1 < p0 {
		return fmt.Errorf("%w: range [%d, %d)", ErrInvalidSeq, p0, p1)
	}
	if !c.unified && (p0 > 0 || p1 >= 0) {
		return fmt.Errorf("%w: partial copy [%d, %d) needs a unified KV cache", ErrInvalidSeq, p0, p1)
	}
	C.llama_memory_seq_cp(c.mem, C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
	return nil
}

// SeqRemove removes the cells of sequence seq in [p0, p1) (p0 < 0: from
// the start; p1 < 0: to the end). seq < 0 means every sequence.
func (c *Context) SeqRemove(seq, p0, p1 int) error {
	if c.c == nil {
		return ErrFreed
	}
	if seq >= c.nSeqMax {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrInvalidSeq, seq, c.nSeqMax)
	}
	if p0 >= 0 && p1 >= 0 && p1 < p0 {
		return fmt.Errorf("%w: range [%d, %d)", ErrInvalidSeq, p0, p1)
	}
	if !C.llama_memory_seq_rm(c.mem, C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)) {
		return fmt.Errorf("%w: partial removal of sequence %d refused", ErrInvalidSeq, seq)
	}
	return nil
}

// SeqPosMax is the largest position held by seq, or -1 when it is empty.
func (c *Context) SeqPosMax(seq int) (int, error) {
	if err := c.checkSeq(seq); err != nil {
		return 0, err
	}
	return int(C.llama_memory_seq_pos_max(c.mem, C.llama_seq_id(seq))), nil
}

// SeqStateSize is the size in bytes of sequence seq's state (its KV cells
// and, for recurrent models, its recurrent state) as llama.cpp would save it.
func (c *Context) SeqStateSize(seq int) (int, error) {
	if c.c == nil {
		return 0, ErrFreed
	}
	if err := c.checkSeq(seq); err != nil {
		return 0, err
	}
	return int(C.llama_state_seq_get_size(c.c, C.llama_seq_id(seq))), nil
}

// SeqSave returns sequence seq's state (its KV cells with their positions
// and, for recurrent models, its recurrent state) as llama.cpp serializes
// it, appended to buf[:0] (grown when too small). The sequence is left as
// it was.
func (c *Context) SeqSave(seq int, buf []byte) ([]byte, error) {
	if c.c == nil {
		return nil, ErrFreed
	}
	if err := c.checkSeq(seq); err != nil {
		return nil, err
	}
	n := int(C.llama_state_seq_get_size(c.c, C.llama_seq_id(seq)))
	if n == 0 {
		return nil, fmt.Errorf("%w: sequence %d has no state to save", ErrInvalidSeq, seq)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	got := int(C.llama_state_seq_get_data(c.c, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(n), C.llama_seq_id(seq)))
	if got != n {
		return nil, fmt.Errorf("%w: saving sequence %d wrote %d of %d bytes", ErrInvalidSeq, seq, got, n)
	}
	return buf, nil
}

// SeqRestore replaces sequence seq with a state SeqSave returned (of any
// sequence of a context of the same model and KV layout). It fails,
// leaving seq empty, when the KV memory has no room for the cells.
func (c *Context) SeqRestore(seq int, data []byte) error {
	if c.c == nil {
		return ErrFreed
	}
	if err := c.checkSeq(seq); err != nil {
		return err
	}
	if len(data) == 0 {
		return fmt.Errorf("%w: no state to restore into sequence %d", ErrInvalidSeq, seq)
	}
	got := int(C.llama_state_seq_set_data(c.c, (*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.llama_seq_id(seq)))
	if got == 0 {
		C.llama_memory_seq_rm(c.mem, C.llama_seq_id(seq), -1, -1)
		return fmt.Errorf("%w: restoring %d bytes into sequence %d", ErrNoKVSlot, len(data), seq)
	}
	return nil
}

// Clear empties the KV memory.
func (c *Context) Clear() {
	if c.c != nil {
		C.llama_memory_clear(c.mem, C.bool(true))
	}
}
