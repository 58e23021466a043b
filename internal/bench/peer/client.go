package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/bench"
)

// client drives the servers through their HTTP APIs.
type client struct{ http *http.Client }

func (c *client) post(ctx context.Context, url string, body any, out any) error {
	var buf []byte
	switch b := body.(type) {
	case []byte:
		buf = b
	default:
		var err error
		if buf, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %.300s", url, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// chatFamily asks verdict serve which chat wrapper it renders prompts in
// (its /v1/models card: verdict.chat_template), so that llama-server's
// completions carry exactly verdict's prompt. llama-server's own template
// is no guide: for a model without one it reports its chatml fallback,
// while verdict renders plain prompts, and then llama-server would
// evaluate ~14 tokens more per decision than verdict.
func (c *client) chatFamily(ctx context.Context, verdictBase string) (engine.ChatFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, verdictBase+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return servedFamily(resp.Body)
}

// servedFamily reads the chat family from a verdict /v1/models body: the
// card that answers is the first one.
func servedFamily(r io.Reader) (engine.ChatFamily, error) {
	var models struct {
		Models []struct {
			Verdict *struct {
				ChatTemplate string `json:"chat_template"`
			} `json:"verdict"`
		} `json:"models"`
	}
	if err := json.NewDecoder(r).Decode(&models); err != nil {
		return "", fmt.Errorf("verdict /v1/models: %w", err)
	}
	if len(models.Models) == 0 || models.Models[0].Verdict == nil || models.Models[0].Verdict.ChatTemplate == "" {
		return "", errors.New("verdict /v1/models: the first model card has no verdict.chat_template")
	}
	return engine.ChatFamily(models.Models[0].Verdict.ChatTemplate), nil
}

// tokenIDs is text's tokens as llama-server's /tokenize gives them, each
// kept as its JSON text (ids are compared, never interpreted).
func (c *client) tokenIDs(ctx context.Context, base, text string) ([]string, error) {
	var out struct {
		Tokens []json.RawMessage `json:"tokens"`
	}
	if err := c.post(ctx, base+"/tokenize", map[string]any{"content": text, "add_special": true, "parse_special": true}, &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Tokens))
	for i, t := range out.Tokens {
		ids[i] = string(t)
	}
	return ids, nil
}

// minimalTokens is the fewest tokens any engine that reuses exact prompt
// prefixes must evaluate for texts: the distinct prefixes of their
// tokenizations (the nodes of their token trie). Each state counts once,
// and so does whatever else prompts share: the chat template's preamble
// across states, the question framing across one state's questions.
func (c *client) minimalTokens(ctx context.Context, base string, texts []string) (int64, error) {
	seqs := make([][]string, len(texts))
	for i, t := range texts {
		var err error
		if seqs[i], err = c.tokenIDs(ctx, base, t); err != nil {
			return 0, err
		}
	}
	return distinctPrefixes(seqs), nil
}

// distinctPrefixes counts the nonempty distinct prefixes of seqs.
func distinctPrefixes(seqs [][]string) int64 {
	type edge struct {
		from int
		tok  string
	}
	trie := map[edge]int{}
	for _, s := range seqs {
		node := 0
		for _, t := range s {
			next, ok := trie[edge{node, t}]
			if !ok {
				next = len(trie) + 1
				trie[edge{node, t}] = next
			}
			node = next
		}
	}
	return int64(len(trie))
}

type completion struct {
	Timings struct {
		PromptN  int     `json:"prompt_n"`
		PromptMs float64 `json:"prompt_ms"`
	} `json:"timings"`
}

// prefillRate is llama-server's fresh prefill rate over the round's
// first prompts of up to 3 states (prompt cache off): their tokens over
// their prompt time, so that the mix of lengths counts as the workload
// has it, not the fastest (shortest) prompt alone.
func (c *client) prefillRate(ctx context.Context, base string, w *round) (float64, error) {
	var tokens, ms float64
	for _, h := range w.heads[:min(len(w.heads), 3)] {
		var out completion
		if err := c.post(ctx, base+"/completion", map[string]any{"prompt": w.prompts[h].Text(), "n_predict": 1, "cache_prompt": false}, &out); err != nil {
			return 0, err
		}
		tokens += float64(out.Timings.PromptN)
		ms += out.Timings.PromptMs
	}
	if ms <= 0 {
		return 0, errors.New("llama-server reported no prompt time")
	}
	return tokens / ms * 1000, nil
}

// completions sends one /completion per decision of idx from clients at
// once, in order.
func (c *client) completions(ctx context.Context, base string, w *round, idx []int, clients int) (int64, []time.Duration, error) {
	var tokens int64
	var mu sync.Mutex
	lat, err := bench.FanOut(len(idx), clients, func(k int) error {
		i := idx[k]
		var out completion
		err := c.post(ctx, base+"/completion", map[string]any{
			"prompt": w.prompts[i].Text(), "n_predict": 1, "cache_prompt": true, "n_probs": len(w.decisions[i].Options),
		}, &out)
		mu.Lock()
		tokens += int64(out.Timings.PromptN)
		mu.Unlock()
		return err
	})
	return tokens, lat, err
}

// verdictSystemOne sends one System One request per state.
func (c *client) verdictSystemOne(ctx context.Context, base string, w *round, clients int) (int64, []time.Duration, error) {
	before, err := c.evaluated(ctx, base)
	if err != nil {
		return 0, nil, err
	}
	lat, err := bench.FanOut(len(w.systemOne), clients, func(i int) error {
		return c.post(ctx, base+"/v1/systemone", w.systemOne[i], nil)
	})
	after, merr := c.evaluated(ctx, base)
	return after - before, lat, errors.Join(err, merr)
}

// verdictSemIf sends one SemIf decision per request, those of idx in
// order.
func (c *client) verdictSemIf(ctx context.Context, base string, w *round, idx []int, clients int) (int64, []time.Duration, error) {
	before, err := c.evaluated(ctx, base)
	if err != nil {
		return 0, nil, err
	}
	lat, err := bench.FanOut(len(idx), clients, func(k int) error {
		return c.post(ctx, base+"/invocations", map[string]any{"decision": w.decisions[idx[k]]}, nil)
	})
	after, merr := c.evaluated(ctx, base)
	return after - before, lat, errors.Join(err, merr)
}

// evaluated reads verdict's count of prompt tokens evaluated from /metrics.
func (c *client) evaluated(ctx context.Context, base string) (int64, error) {
	m, err := c.metrics(ctx, base, "verdict_engine_tokens_evaluated_total")
	if err != nil {
		return 0, err
	}
	return int64(m[0]), nil
}

// verdictPrefillRate is verdict's fresh prefill rate over the first
// question of up to 3 states of w, one at a time: tokens evaluated over
// seconds inside llama_decode, as llama-server's prompt timing counts
// them, all the states' together (as prefillRate).
func (c *client) verdictPrefillRate(ctx context.Context, base string, w *round) (float64, error) {
	names := []string{"verdict_engine_tokens_evaluated_total", "verdict_engine_decode_seconds_total"}
	before, err := c.metrics(ctx, base, names...)
	if err != nil {
		return 0, err
	}
	for _, h := range w.heads[:min(len(w.heads), 3)] {
		if err := c.post(ctx, base+"/invocations", map[string]any{"decision": w.decisions[h]}, nil); err != nil {
			return 0, err
		}
	}
	after, err := c.metrics(ctx, base, names...)
	if err != nil {
		return 0, err
	}
	s := after[1] - before[1]
	if s <= 0 {
		return 0, errors.New("verdict's /metrics counted no decode time")
	}
	return (after[0] - before[0]) / s, nil
}

// metrics reads the values of unlabelled series from verdict's /metrics,
// in the order named.
func (c *client) metrics(ctx context.Context, base string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(b), names)
}

// parseMetrics finds each named series' value in a Prometheus text body.
func parseMetrics(body string, names []string) ([]float64, error) {
	out := make([]float64, len(names))
	found := make([]bool, len(names))
	for _, line := range strings.Split(body, "\n") {
		for i, n := range names {
			if v, ok := strings.CutPrefix(line, n+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return nil, fmt.Errorf("verdict /metrics: %s: %w", n, err)
				}
				out[i], found[i] = f, true
			}
		}
	}
	for i, n := range names {
		if !found[i] {
			return nil, fmt.Errorf("verdict /metrics has no %s", n)
		}
	}
	return out, nil
}
