//go:build cgo

package llama

/*
#cgo CXXFLAGS: -std=c++17
#cgo CFLAGS: -D_GNU_SOURCE
#cgo CPPFLAGS: -I${SRCDIR}/../../../../.verdict/llama/include -I${SRCDIR}/notbuilt
#cgo LDFLAGS: -L${SRCDIR}/../../../../.verdict/llama/lib -L${SRCDIR}/notbuilt -lverdict-llama
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "llama.h"
#include "ggml-backend.h"
#include "shim.h"

extern void verdictLog(int level, char *text, void *user_data);

static void verdict_log_setup(void) {
	llama_log_set((ggml_log_callback)verdictLog, NULL);
}

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

// verdict_devices writes up to max "name\tdescription\ttype" lines of the
// ggml devices registered in this process into buf.
static void verdict_devices(char *buf, size_t n) {
	size_t off = 0;
	buf[0] = 0;
	for (size_t i = 0; i < ggml_backend_dev_count() && off + 1 < n; i++) {
		ggml_backend_dev_t d = ggml_backend_dev_get(i);
		const char *kind = "other";
		switch (ggml_backend_dev_type(d)) {
		case GGML_BACKEND_DEVICE_TYPE_CPU: kind = "cpu"; break;
		case GGML_BACKEND_DEVICE_TYPE_GPU: kind = "gpu"; break;
		case GGML_BACKEND_DEVICE_TYPE_ACCEL: kind = "accel"; break;
		default: break;
		}
		int w = snprintf(buf + off, n - off, "%s\t%s\t%s\n", ggml_backend_dev_name(d), ggml_backend_dev_description(d), kind);
		if (w < 0) {
			break;
		}
		off += (size_t)w;
	}
}

static void verdict_batch_set(struct llama_batch *b, int i, llama_token tok, llama_pos pos, int n_seq, const int32_t *seqs, bool logits) {
	b->token[i] = tok;
	b->pos[i] = pos;
	b->n_seq_id[i] = n_seq;
	for (int s = 0; s < n_seq; s++) {
		b->seq_id[i][s] = seqs[s];
	}
	b->logits[i] = logits ? 1 : 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Sentinel errors of the binding. llama_decode's return codes map onto them.
var (
	ErrNoKVSlot     = errors.New("llamacpp: no KV cache slot for the batch (context full)")
	ErrAborted      = errors.New("llamacpp: decode aborted")
	ErrInvalidBatch = errors.New("llamacpp: invalid batch")
	ErrDecodeFatal  = errors.New("llamacpp: fatal decode error")
	ErrInvalidSeq   = errors.New("llamacpp: invalid sequence id or range")
	ErrNoLogits     = errors.New("llamacpp: no logits for that batch index")
	ErrBatchFull    = errors.New("llamacpp: batch is full")
	ErrFreed        = errors.New("llamacpp: use after free")
	ErrTokenize     = errors.New("llamacpp: tokenize failed")
)

var backendOnce sync.Once

// initBackend initialises llama.cpp once per process and routes its logs
// through slog at debug level. When VERDICT_GGML_LIB_PATH names a folder,
// ggml backends there (CUDA, …) are loaded first. A build with loadable
// backends (LINK=dynamic) then loads the modules beside libggml: the CPU
// one, and CUDA's where the image ships it.
func initBackend() {
	backendOnce.Do(func() {
		C.verdict_log_setup()
		if dir := os.Getenv("VERDICT_GGML_LIB_PATH"); dir != "" {
			cdir := C.CString(dir)
			C.ggml_backend_load_all_from_path(cdir)
			C.free(unsafe.Pointer(cdir))
		}
		if C.verdict_load_backends() == 0 {
			slog.Error("llama.cpp: no ggml backend could be loaded (a LINK=dynamic build looks beside libggml and in the executable's folder; VERDICT_GGML_LIB_PATH names another)")
		}
		C.llama_backend_init()
	})
}

// SystemInfo is llama.cpp's system info line: the SIMD features the CPU
// backend was compiled with (AVX2 = 1 | …). It initialises the backends.
func SystemInfo() string {
	initBackend()
	return strings.TrimSpace(C.GoString(C.llama_print_system_info()))
}

// GlibcAtLeast reports whether the C library is glibc major.minor or later.
func GlibcAtLeast(major, minor int) bool {
	return bool(C.verdict_glibc_at_least(C.int(major), C.int(minor)))
}

// Device is a ggml compute device registered in this process.
type Device struct {
	Name, Description string
	Kind              string // cpu, gpu, accel or other
}

// Devices lists the ggml devices registered in this process. It
// initialises the backends (loading extra ones from VERDICT_GGML_LIB_PATH).
func Devices() []Device {
	initBackend()
	buf := make([]C.char, 16<<10)
	C.verdict_devices(&buf[0], C.size_t(len(buf)))
	var out []Device
	for _, line := range strings.Split(C.GoString(&buf[0]), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 {
			out = append(out, Device{Name: f[0], Description: f[1], Kind: f[2]})
		}
	}
	return out
}

var logBuf struct {
	sync.Mutex
	strings.Builder
}

//export verdictLog
func verdictLog(level C.int, text *C.char, _ unsafe.Pointer) {
	s := C.GoString(text)
	logBuf.Lock()
	logBuf.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		logBuf.Unlock()
		return
	}
	line := strings.TrimRight(logBuf.String(), "\n")
	logBuf.Reset()
	logBuf.Unlock()
	if level == C.GGML_LOG_LEVEL_ERROR {
		slog.Warn("llama.cpp", "msg", line)
		return
	}
	slog.Debug("llama.cpp", "msg", line)
}

// ModelParams configure model loading.
type ModelParams struct {
	GPULayers int  // layers to offload; -1 = all
	UseMmap   bool // map the file instead of reading it
}

// Model is a loaded GGUF model. Free it with Free.
type Model struct {
	m      *C.struct_llama_model
	vocab  *C.struct_llama_vocab
	nVocab int
}

// loadMu serializes model loads and frees. llama.cpp does not document its
// loader as safe to run concurrently, and two engines loading at once in
// one process (the server package's parallel tests) crashed inside
// llama_model_load_from_file once; verdict up loads a model per pool.
var loadMu sync.Mutex

// LoadModel loads a GGUF file. Loads run one at a time (loadMu).
func LoadModel(path string, p ModelParams) (*Model, error) {
	initBackend()
	loadMu.Lock()
	defer loadMu.Unlock()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("llamacpp: load model: %w", err)
	}
	gpu := p.GPULayers
	if gpu < 0 {
		gpu = 999
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	m := C.llama_model_load_from_file(cpath, C.verdict_model_params(C.int(gpu), C.bool(p.UseMmap)))
	if m == nil {
		return nil, fmt.Errorf("llamacpp: load model %s failed (unsupported architecture or corrupt file; run with --log-level debug for llama.cpp's log)", path)
	}
	v := C.llama_model_get_vocab(m)
	return &Model{m: m, vocab: v, nVocab: int(C.llama_vocab_n_tokens(v))}, nil
}

// Free releases the model. It is safe to call twice.
func (m *Model) Free() {
	loadMu.Lock()
	defer loadMu.Unlock()
	if m.m != nil {
		C.llama_model_free(m.m)
		m.m, m.vocab = nil, nil
	}
}

// IsRecurrent reports whether the model keeps a recurrent state per
// sequence (Mamba, RWKV, …) instead of a KV cache.
func (m *Model) IsRecurrent() bool { return bool(C.llama_model_is_recurrent(m.m)) }

// IsHybrid reports whether the model mixes attention layers (KV cache) with
// recurrent layers (Qwen3.5, Jamba, Granite 4, …).
func (m *Model) IsHybrid() bool { return bool(C.llama_model_is_hybrid(m.m)) }

// VocabSize is the number of tokens in the vocabulary.
func (m *Model) VocabSize() int { return m.nVocab }

// AddBOS reports whether the vocabulary wants a BOS token at the start.
func (m *Model) AddBOS() bool { return bool(C.llama_vocab_get_add_bos(m.vocab)) }

// IsControl reports whether t is a control token.
func (m *Model) IsControl(t Token) bool {
	return bool(C.llama_vocab_is_control(m.vocab, C.llama_token(t)))
}

// IsUserDefined reports whether t is a user-defined token. llama.cpp
// matches these in any text, even when special-token parsing is off.
func (m *Model) IsUserDefined(t Token) bool {
	return C.llama_vocab_get_attr(m.vocab, C.llama_token(t))&C.LLAMA_TOKEN_ATTR_USER_DEFINED != 0
}

// Tokenize converts text to tokens. addSpecial adds BOS (and EOS) when
// the model asks for them; parseSpecial turns control-token text such as
// "<|im_start|>" into those tokens.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]Token, error) {
	if m.m == nil {
		return nil, ErrFreed
	}
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("%w: text of %d bytes", ErrTokenize, len(text))
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	capacity := len(text) + 8
	buf := make([]Token, capacity)
	n := C.llama_tokenize(m.vocab, ctext, C.int32_t(len(text)), (*C.llama_token)(unsafe.Pointer(&buf[0])),
		C.int32_t(capacity), C.bool(addSpecial), C.bool(parseSpecial))
	if n < 0 {
		if n == C.INT32_MIN {
			return nil, fmt.Errorf("%w: overflow", ErrTokenize)
		}
		capacity = int(-n)
		buf = make([]Token, capacity)
		n = C.llama_tokenize(m.vocab, ctext, C.int32_t(len(text)), (*C.llama_token)(unsafe.Pointer(&buf[0])),
			C.int32_t(capacity), C.bool(addSpecial), C.bool(parseSpecial))
		if n < 0 {
			return nil, fmt.Errorf("%w: code %d", ErrTokenize, int(n))
		}
	}
	return buf[:n], nil
}

// Piece returns the text of one token. special renders control tokens.
func (m *Model) Piece(t Token, special bool) (string, error) {
	if m.m == nil {
		return "", ErrFreed
	}
	if t < 0 || int(t) >= m.nVocab {
		return "", fmt.Errorf("llamacpp: token %d out of range [0, %d)", t, m.nVocab)
	}
	var buf [128]C.char
	n := C.llama_token_to_piece(m.vocab, C.llama_token(t), &buf[0], C.int32_t(len(buf)), 0, C.bool(special))
	if n < 0 {
		big := make([]C.char, int(-n))
		n = C.llama_token_to_piece(m.vocab, C.llama_token(t), &big[0], C.int32_t(len(big)), 0, C.bool(special))
		if n < 0 {
			return "", fmt.Errorf("llamacpp: token_to_piece %d: code %d", t, int(n))
		}
		return C.GoStringN(&big[0], n), nil
	}
	return C.GoStringN(&buf[0], n), nil
}

// Meta returns a metadata value of the GGUF file as a string.
func (m *Model) Meta(key string) (string, bool) {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	var buf [512]C.char
	n := C.llama_model_meta_val_str(m.m, ckey, &buf[0], C.size_t(len(buf)))
	if n < 0 {
		return "", false
	}
	if int(n) >= len(buf) {
		big := make([]C.char, int(n)+1)
		C.llama_model_meta_val_str(m.m, ckey, &big[0], C.size_t(len(big)))
		return C.GoString(&big[0]), true
	}
	return C.GoString(&buf[0]), true
}

// ChatTemplate returns the model's default chat template, or "".
func (m *Model) ChatTemplate() string {
	t := C.llama_model_chat_template(m.m, nil)
	if t == nil {
		return ""
	}
	return C.GoString(t)
}

// Description is llama.cpp's one-line model description.
func (m *Model) Description() string {
	var buf [256]C.char
	n := C.llama_model_desc(m.m, &buf[0], C.size_t(len(buf)))
	if n < 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// Params is the model's parameter count.
func (m *Model) Params() uint64 { return uint64(C.llama_model_n_params(m.m)) }

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

// Batch is a reusable llama_batch. Allocate once, Clear between uses.
type Batch struct {
	b       C.struct_llama_batch
	cap     int
	seqsPer int
	n       int
	maxSeq  int
	logits  []bool
	freed   bool
	seqBuf  []C.int32_t
}

// NewBatch allocates a batch of up to capacity tokens, each in up to
// seqsPerToken sequences.
func NewBatch(capacity, seqsPerToken int) (*Batch, error) {
	if capacity < 1 || seqsPerToken < 1 || seqsPerToken > 256 {
		return nil, fmt.Errorf("llamacpp: batch capacity %d, seqs per token %d: out of range", capacity, seqsPerToken)
	}
	return &Batch{b: C.llama_batch_init(C.int32_t(capacity), 0, C.int32_t(seqsPerToken)),
		cap: capacity, seqsPer: seqsPerToken, logits: make([]bool, capacity), maxSeq: -1,
		seqBuf: make([]C.int32_t, seqsPerToken)}, nil
}

// Add appends a token at position pos in the given sequences; logits asks
// for its output row.
func (b *Batch) Add(t Token, pos int, seqs []int, logits bool) error {
	switch {
	case b.freed:
		return ErrFreed
	case b.n >= b.cap:
		return fmt.Errorf("%w: capacity %d", ErrBatchFull, b.cap)
	case pos < 0:
		return fmt.Errorf("%w: negative position %d", ErrInvalidBatch, pos)
	case len(seqs) == 0 || len(seqs) > b.seqsPer:
		return fmt.Errorf("%w: token in %d sequences, batch allows 1..%d", ErrInvalidSeq, len(seqs), b.seqsPer)
	}
	for i, s := range seqs {
		if s < 0 || s > 255 {
			return fmt.Errorf("%w: %d", ErrInvalidSeq, s)
		}
		if s > b.maxSeq {
			b.maxSeq = s
		}
		b.seqBuf[i] = C.int32_t(s)
	}
	C.verdict_batch_set(&b.b, C.int(b.n), C.llama_token(t), C.llama_pos(pos), C.int(len(seqs)), &b.seqBuf[0], C.bool(logits))
	b.logits[b.n] = logits
	b.n++
	return nil
}

// Len is the number of tokens in the batch.
func (b *Batch) Len() int { return b.n }

// Cap is the batch's capacity.
func (b *Batch) Cap() int { return b.cap }

// Clear empties the batch for reuse.
func (b *Batch) Clear() {
	b.n = 0
	b.maxSeq = -1
}

// Free releases the batch. Safe to call twice.
func (b *Batch) Free() {
	if !b.freed {
		C.llama_batch_free(b.b)
		b.freed = true
	}
}
