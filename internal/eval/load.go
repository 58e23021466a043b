package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/batch"
)

// Gold holds gold labels: for each line id (a JevBench case id, or a SemIf
// decision id) either one option id (Scalar) or option ids by question key.
type Gold struct {
	byCase map[string]map[string]string
	scalar map[string]string
}

// Unknown is the gold value of a question the state does not settle: it is
// skipped.
const Unknown = "unknown"

// ReadGold reads JSONL gold records {"id", "gold"}: gold is a map of
// question key to value (JevBench: true/false for noul, an option id for
// choice, a level index for score, "unknown") or one value for a single
// decision. Values become option ids: true → "true", 2 → "2".
func ReadGold(r io.Reader) (*Gold, error) {
	g := &Gold{byCase: map[string]map[string]string{}, scalar: map[string]string{}}
	lr := batch.NewLineReader(r, 64<<20)
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return g, nil
		}
		if err != nil {
			return nil, err
		}
		if l.TooLong {
			return nil, fmt.Errorf("gold line %d: too long", l.No)
		}
		if len(l.Data) == 0 {
			continue
		}
		var rec struct {
			ID   string          `json:"id"`
			Gold json.RawMessage `json:"gold"`
		}
		if err := json.Unmarshal(l.Data, &rec); err != nil || rec.ID == "" || len(rec.Gold) == 0 {
			return nil, fmt.Errorf("gold line %d: want {\"id\": string, \"gold\": …}", l.No)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(rec.Gold, &m) == nil {
			qs := make(map[string]string, len(m))
			for k, v := range m {
				s, err := goldValue(v)
				if err != nil {
					return nil, fmt.Errorf("gold line %d: gold.%s: %v", l.No, k, err)
				}
				qs[k] = s
			}
			g.byCase[rec.ID] = qs
			continue
		}
		s, err := goldValue(rec.Gold)
		if err != nil {
			return nil, fmt.Errorf("gold line %d: gold: %v", l.No, err)
		}
		g.scalar[rec.ID] = s
	}
}

func goldValue(v json.RawMessage) (string, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "", err
	}
	switch t := x.(type) {
	case bool:
		return strconv.FormatBool(t), nil
	case string:
		return t, nil
	case float64:
		if t != float64(int(t)) {
			return "", fmt.Errorf("a level must be an integer, got %v", t)
		}
		return strconv.Itoa(int(t)), nil
	}
	return "", fmt.Errorf("want true, false, a string or an integer, got %s", v)
}

// Lookup returns the gold option id of a decision: by line id and question
// key, else by the decision id alone.
func (g *Gold) Lookup(lineID, decisionID string) (string, bool) {
	if qs, ok := g.byCase[lineID]; ok {
		v, ok := qs[decisionID]
		return v, ok
	}
	v, ok := g.scalar[decisionID]
	return v, ok
}

// ReadFamilies reads the "domain" (else "family") of each line of a cases
// file, by its "id"; lines without one are skipped.
func ReadFamilies(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	lr := batch.NewLineReader(r, 64<<20)
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			ID     string `json:"id"`
			Domain string `json:"domain"`
			Family string `json:"family"`
		}
		if l.TooLong || json.Unmarshal(l.Data, &head) != nil || head.ID == "" {
			continue
		}
		if head.Domain == "" {
			head.Domain = head.Family
		}
		out[head.ID] = head.Domain
	}
}

// Matched is the outcome of joining records with gold labels.
type Matched struct {
	Examples []Example
	// Results are the scored results behind Examples, same order.
	Results []decision.Result
	// Skipped: gold "unknown"; Unmatched: no gold record; BadGold: a gold
	// value that is not one of the decision's options.
	Skipped, Unmatched, BadGold int
	// LineErrors counts input lines that failed to parse (no decisions).
	LineErrors int
}

// Join turns batch records into labeled examples. A record line's family is
// families[record id], else the result's kind; its type the System One
// question type, else "decision".
func Join(recs []batch.Record, g *Gold, families map[string]string) Matched {
	var m Matched
	for _, rec := range recs {
		if rec.Error != nil {
			m.LineErrors++
			continue
		}
		for _, r := range rec.Results {
			gold, ok := g.Lookup(rec.ID, r.ID)
			switch {
			case !ok:
				m.Unmatched++
				continue
			case gold == Unknown:
				m.Skipped++
				continue
			}
			gi := -1
			for i, o := range r.OptionIDs {
				if o == gold {
					gi = i
				}
			}
			if gi < 0 {
				m.BadGold++
				continue
			}
			e := Example{Family: families[rec.ID], Type: rec.Types[r.ID], Options: r.OptionIDs, Gold: gi}
			if e.Family == "" {
				e.Family = r.Kind
			}
			if e.Family == "" {
				e.Family = "-"
			}
			if e.Type == "" {
				e.Type = "decision"
			}
			if r.Error == nil && len(r.Probabilities) == len(r.OptionIDs) {
				e.Probs = r.Probabilities
			}
			if r.Timing != nil {
				e.LatencyMS = r.Timing.Total
			}
			m.Examples = append(m.Examples, e)
			m.Results = append(m.Results, r)
		}
	}
	return m
}

// ReadRecords reads a `verdict batch` output file.
func ReadRecords(path string) ([]batch.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []batch.Record
	lr := batch.NewLineReader(f, 1<<30)
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(l.Data) == 0 {
			continue
		}
		var rec batch.Record
		if err := json.Unmarshal(l.Data, &rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", path, l.No, err)
		}
		out = append(out, rec)
	}
}
