//go:build cgo

package llamacpp

import (
	"fmt"
	"math"

	"github.com/verdict-dev/verdict/engine/llamacpp/internal/llama"
)

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
		if !e.checkCaller(it) {
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
