package peer

import (
	"encoding/json"
	"fmt"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// round is one mode's workload in one round: the cases with their states
// prefixed by a tag of both, as System One bodies, decisions and
// verdict's prompts.
type round struct {
	systemOne [][]byte            // one body per state
	decisions []decision.Decision // every question, state by state
	prompts   []engine.Prompt     // decisions' prompts, as verdict renders them
	heads     []int               // index of each state's first decision
}

// all is the index of every decision.
func (w *round) all() []int {
	all := make([]int, len(w.decisions))
	for i := range all {
		all[i] = i
	}
	return all
}

// texts is the prompt text of the decisions at idx.
func (w *round) texts(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = w.prompts[i].Text()
	}
	return out
}

// buildRound is cases' round tagged tag: each state prefixed "Round
// tag.", each case a System One body for verdict serve, and its
// decisions with the prompts verdict renders for them in family.
func buildRound(cases [][]byte, tag string, family engine.ChatFamily) (*round, error) {
	w := &round{}
	for i, line := range cases {
		var c map[string]any
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("case %d: %w", i+1, err)
		}
		st, ok := c["state"].(string)
		if !ok {
			return nil, fmt.Errorf("case %d: state is not text", i+1)
		}
		c["state"] = fmt.Sprintf("Round %s. %s", tag, st)
		c["model"] = "default" // an alias every verdict serve accepts
		delete(c, "id")
		body, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		req, err := decision.ParseSystemOne(body, decision.Limits{})
		if err != nil {
			return nil, fmt.Errorf("case %d: %w", i+1, err)
		}
		w.systemOne = append(w.systemOne, body)
		w.heads = append(w.heads, len(w.decisions))
		for _, d := range req.Decisions() {
			w.decisions = append(w.decisions, d)
			w.prompts = append(w.prompts, engine.Render(&d, family))
		}
	}
	return w, nil
}
