//go:build cgo

package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp"
)

// words is the vocabulary of synthetic bench text.
var wordList = strings.Fields(`customer account access password reset email billing payment sales support
refund request issue ticket team product feature failing deadline plan enterprise pro free urgent
critical high medium low user users data export error log service queue route order working
workaround problem help need please time day week month year after before because the of and to in
is it that for on with as was be by this are or from at an not have has but which what when who`)

// text returns deterministic pseudo-English of about n tokens of m.
func text(m *llamacpp.Engine, rng *rand.Rand, n int) (string, error) {
	var b strings.Builder
	for {
		for i := 0; i < 16; i++ {
			b.WriteString(wordList[rng.IntN(len(wordList))])
			b.WriteByte(' ')
		}
		b.WriteString(". ")
		count, err := m.TokenCount(b.String())
		if err != nil {
			return "", err
		}
		if count >= n {
			return strings.TrimSpace(b.String()), nil
		}
	}
}

// shape777 builds W1 from Shape777Requests: a group of decisions per
// state.
func shape777(e *llamacpp.Engine, cfg Config) ([][]decision.Decision, error) {
	bodies, err := Shape777Requests(e, cfg.States, cfg.Questions, cfg.StateTokens, cfg.SuffixTokens)
	if err != nil {
		return nil, err
	}
	var groups [][]decision.Decision
	for _, body := range bodies {
		req, err := decision.ParseSystemOne(body, decision.Limits{})
		if err != nil {
			return nil, err
		}
		groups = append(groups, req.Decisions())
	}
	return groups, nil
}

// The shape-777 workload's lengths in tokens: each state, and each
// question's suffix (question, options, cue).
const (
	Shape777StateTokens  = 1800
	Shape777SuffixTokens = 90
)

// Shape777Requests is the shape-777 workload as System One requests, one
// per state: states states of about stateTokens tokens, each with
// questions choice questions (four options) whose suffix (question,
// options, cue) is about suffixTokens tokens, measured with e's own
// tokenization. It is deterministic for a model: W1 and the peer
// benchmark send the same requests.
func Shape777Requests(e *llamacpp.Engine, states, questions, stateTokens, suffixTokens int) ([][]byte, error) {
	rng := rand.New(rand.NewPCG(777, 777))
	type question struct {
		Type         string            `json:"type"`
		Instructions string            `json:"instructions"`
		Criteria     map[string]string `json:"criteria"`
	}
	type request struct {
		State     string              `json:"state"`
		Questions map[string]question `json:"questions"`
	}
	var out [][]byte
	for s := 0; s < states; s++ {
		st, err := text(e, rng, stateTokens)
		if err != nil {
			return nil, err
		}
		req := request{State: st, Questions: map[string]question{}}
		for q := 0; q < questions; q++ {
			crit := map[string]string{}
			for o := 0; o < 4; o++ {
				crit[string(rune('a'+o))] = wordList[rng.IntN(len(wordList))]
			}
			// Grow the question until the suffix reaches its length.
			var words []string
			for {
				qq := question{Type: "choice", Instructions: strings.Join(words, " ") + "?", Criteria: crit}
				one, err := json.Marshal(request{State: st, Questions: map[string]question{"q": qq}})
				if err != nil {
					return nil, err
				}
				parsed, err := decision.ParseSystemOne(one, decision.Limits{})
				if err != nil {
					return nil, err
				}
				_, suffix, err := e.PromptTokens(parsed.Decisions()[0])
				if err != nil {
					return nil, err
				}
				if suffix >= suffixTokens {
					req.Questions[fmt.Sprintf("q%02d", q)] = qq
					break
				}
				words = append(words, wordList[rng.IntN(len(wordList))])
			}
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		out = append(out, body)
	}
	return out, nil
}

// independent builds W3: n decisions with distinct states of about
// tokens tokens.
func independent(m *llamacpp.Engine, n, tokens int) ([]decision.Decision, error) {
	rng := rand.New(rand.NewPCG(3, 3))
	var out []decision.Decision
	for i := 0; i < n; i++ {
		st, err := text(m, rng, tokens)
		if err != nil {
			return nil, err
		}
		out = append(out, decision.Decision{
			ID: fmt.Sprintf("ind-%d", i), State: decision.TextState(fmt.Sprintf("Ticket %d. %s", i, st)),
			Question: "Which team should handle this ticket?",
			Options: []decision.Option{{ID: "support", Description: "Customer support."}, {ID: "billing", Description: "Billing."},
				{ID: "engineering", Description: "Engineering."}, {ID: "sales", Description: "Sales."}},
		})
	}
	return out, nil
}

// fixedPrompt builds one decision whose prompt is about n tokens.
func fixedPrompt(m *llamacpp.Engine, n int) (decision.Decision, error) {
	rng := rand.New(rand.NewPCG(300, 300))
	st, err := text(m, rng, n-110)
	if err != nil {
		return decision.Decision{}, err
	}
	return decision.Decision{ID: "prefill", State: decision.TextState(st), Question: "Which team should handle this ticket?",
		Options: []decision.Option{{ID: "support", Description: "Customer support."}, {ID: "billing", Description: "Billing and payments."},
			{ID: "engineering", Description: "Engineering and incidents."}, {ID: "sales", Description: "Sales."}}}, nil
}

// jevbench reads up to limit cases of JevBench-240 as decision groups.
func jevbench(path string, limit int) ([][]decision.Decision, error) {
	if path == "" {
		return nil, fmt.Errorf("no --jevbench file given")
	}
	path = JevBenchCases(path)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("JevBench-240 is not at %s: %s", path, JevBenchHowTo)
	}
	if err != nil {
		return nil, err
	}
	var groups [][]decision.Decision
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if len(groups) == limit {
			break
		}
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		req, err := decision.ParseSystemOne([]byte(line), decision.Limits{})
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		ds := req.Decisions()
		for k := range ds {
			ds[k].ID = c.ID + "." + ds[k].ID
		}
		groups = append(groups, ds)
	}
	return groups, nil
}
