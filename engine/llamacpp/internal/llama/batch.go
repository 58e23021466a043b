//go:build cgo

package llama

/*
#include "llama.h"

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

import "fmt"

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
