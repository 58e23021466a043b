package decision

import (
	"encoding/json"
	"strconv"
)

// Shape tells which SemIf envelope a request used, so that the response can
// answer in the same one.
type Shape int

// Shapes of a SemIf request.
const (
	ShapeBare    Shape = iota // {"state":…, "question":…, "options":…}
	ShapeWrapped              // {"decision": {…}}
	ShapeBatch                // {"decisions": [{…}, …]}
)

// ParseSemIf parses a SemIf request: one decision, bare or under
// "decision", or a batch under "decisions". Unknown fields are rejected with
// their path, so that a misspelt optional field (say "metdata") is never
// silently dropped. In a batch, a decision without an id gets its index
// ("0", "1", …) as id, and ids must be unique.
func ParseSemIf(data []byte, l Limits) ([]Decision, Shape, error) {
	l = l.withDefaults()
	if err := checkJSON(data); err != nil {
		return nil, ShapeBare, err
	}
	// top holds problems of the top-level object itself (duplicate keys);
	// a bare decision re-reads that object and reports them again itself.
	var top fieldErrs
	members, ok := objectMembers(data, "", &top)
	if !ok {
		return nil, ShapeBare, top.err()
	}
	if len(members) == 1 {
		switch members[0].Key {
		case "decision":
			errs := top
			d, _ := parseSemIfDecision(members[0].Value, "decision", l, &errs)
			if err := errs.err(); err != nil {
				return nil, ShapeWrapped, err
			}
			return []Decision{d}, ShapeWrapped, nil
		case "decisions":
			errs := top
			ds := parseSemIfBatch(members[0].Value, "decisions", l, &errs)
			if err := errs.err(); err != nil {
				return nil, ShapeBatch, err
			}
			return ds, ShapeBatch, nil
		}
	}
	for _, m := range members {
		if m.Key == "decision" || m.Key == "decisions" {
			top.add(m.Key, "must be the only top-level field")
			return nil, ShapeBare, top.err()
		}
	}
	var errs fieldErrs
	d, _ := parseSemIfDecision(data, "", l, &errs)
	if err := errs.err(); err != nil {
		return nil, ShapeBare, err
	}
	return []Decision{d}, ShapeBare, nil
}

// ParseSemIfDecision parses one bare SemIf decision (one line of a JSONL
// file, for example). Wrapped input ({"decision": …}) is accepted too.
func ParseSemIfDecision(data []byte, l Limits) (Decision, error) {
	ds, shape, err := ParseSemIf(data, l)
	if err != nil {
		return Decision{}, err
	}
	if shape == ShapeBatch {
		var errs fieldErrs
		errs.add("decisions", "a batch is not allowed here; send one decision")
		return Decision{}, errs.err()
	}
	return ds[0], nil
}

func parseSemIfBatch(raw json.RawMessage, path string, l Limits, errs *fieldErrs) []Decision {
	elems, ok := arrayElems(raw, path, errs)
	if !ok {
		return nil
	}
	switch {
	case len(elems) == 0:
		errs.add(path, "must hold at least one decision")
		return nil
	case len(elems) > l.MaxDecisions:
		errs.addLarge(path, "holds %d decisions, limit is %d", len(elems), l.MaxDecisions)
		return nil
	}
	out := make([]Decision, 0, len(elems))
	seen := map[string]int{}
	for i, e := range elems {
		p := join(path, i)
		d, ok := parseSemIfDecision(e, p, l, errs)
		if !ok {
			continue
		}
		if d.ID == "" {
			d.ID = strconv.Itoa(i)
		}
		if j, dup := seen[d.ID]; dup {
			errs.add(join(p, "id"), "duplicate %q (also %s[%d])", d.ID, path, j)
			continue
		}
		seen[d.ID] = i
		out = append(out, d)
	}
	return out
}

func parseSemIfDecision(raw json.RawMessage, path string, l Limits, errs *fieldErrs) (Decision, bool) {
	before := len(errs.list)
	members, ok := objectMembers(raw, path, errs)
	if !ok {
		return Decision{}, false
	}
	var d Decision
	var haveState, haveQuestion, haveOptions bool
	for _, m := range members {
		p := join(path, m.Key)
		switch m.Key {
		case "id":
			d.ID, _ = stringField(m.Value, p, errs)
		case "kind":
			d.Kind, _ = stringField(m.Value, p, errs)
		case "state":
			haveState = true
			d.State, _ = parseState(m.Value, p, l.MaxStateBytes, errs)
		case "question":
			haveQuestion = true
			d.Question, _ = stringField(m.Value, p, errs)
		case "options":
			haveOptions = true
			d.Options = parseSemIfOptions(m.Value, p, errs)
		case "metadata":
			d.Metadata = parseMetadata(m.Value, p, errs)
		case "route":
			s, _ := stringField(m.Value, p, errs)
			d.Route = Route(s)
		case "priority":
			s, _ := stringField(m.Value, p, errs)
			d.Priority = Priority(s)
		case "debias":
			var k int
			if err := json.Unmarshal(m.Value, &k); err != nil {
				errs.add(p, "must be an integer 0..255")
			} else {
				d.Debias = k
			}
		default:
			errs.add(p, "unknown field")
		}
	}
	if !haveState {
		errs.add(join(path, "state"), "is required")
	}
	if !haveQuestion {
		errs.add(join(path, "question"), "is required")
	}
	if !haveOptions {
		errs.add(join(path, "options"), "is required")
	}
	// Check the rules too, so that every problem is reported at once, but
	// say nothing more about a field whose decoding already failed.
	errs.quietFrom, errs.quiet = before, true
	d.validate(l, path, errs)
	errs.quiet = false
	if len(errs.list) > before {
		return Decision{}, false
	}
	return d, true
}

func parseSemIfOptions(raw json.RawMessage, path string, errs *fieldErrs) []Option {
	elems, ok := arrayElems(raw, path, errs)
	if !ok {
		return nil
	}
	out := make([]Option, 0, len(elems))
	for i, e := range elems {
		p := join(path, i)
		members, ok := objectMembers(e, p, errs)
		if !ok {
			continue
		}
		var o Option
		var haveID, haveDesc bool
		for _, m := range members {
			mp := join(p, m.Key)
			switch m.Key {
			case "id":
				haveID = true
				o.ID, _ = stringField(m.Value, mp, errs)
			case "description":
				haveDesc = true
				o.Description, _ = stringField(m.Value, mp, errs)
			default:
				errs.add(mp, "unknown field")
			}
		}
		if !haveID {
			errs.add(join(p, "id"), "is required")
		}
		if !haveDesc {
			errs.add(join(p, "description"), "is required")
		}
		out = append(out, o)
	}
	return out
}

func parseMetadata(raw json.RawMessage, path string, errs *fieldErrs) map[string]string {
	members, ok := objectMembers(raw, path, errs)
	if !ok {
		return nil
	}
	md := make(map[string]string, len(members))
	for _, m := range members {
		if s, ok := stringField(m.Value, join(path, m.Key), errs); ok {
			md[m.Key] = s
		}
	}
	return md
}
