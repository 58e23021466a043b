package decision

import (
	"bytes"
	"encoding/json"
	"strings"
)

// State is the unstructured input a decision is about: either text, or a
// JSON object or array kept as canonical JSON (keys sorted, compact).
type State struct {
	// Text is set when the state was a JSON string.
	Text string
	// JSON is set when the state was a JSON object or array. It is canonical.
	JSON json.RawMessage
}

// TextState returns a State holding text.
func TextState(s string) State { return State{Text: s} }

// IsJSON reports whether the state is a JSON object or array.
func (s State) IsJSON() bool { return len(s.JSON) > 0 }

// IsZero reports whether the state is empty.
func (s State) IsZero() bool { return s.Text == "" && len(s.JSON) == 0 }

// Canonical returns the bytes that identify the state: the text itself, or
// the canonical compact JSON. Equal states give equal bytes; the router's
// group key hashes them.
func (s State) Canonical() []byte {
	if s.IsJSON() {
		return append([]byte("json:"), s.JSON...)
	}
	return append([]byte("text:"), s.Text...)
}

// Render returns the state as the model reads it: text as is, JSON states
// indented with sorted keys.
func (s State) Render() string {
	if !s.IsJSON() {
		return s.Text
	}
	b, err := canonicalJSON(s.JSON, true)
	if err != nil { // cannot happen: JSON was validated on the way in
		return string(s.JSON)
	}
	return string(b)
}

// Len is the size of the state in bytes as submitted to the model.
func (s State) Len() int {
	if s.IsJSON() {
		return len(s.JSON)
	}
	return len(s.Text)
}

// MarshalJSON encodes text as a JSON string and JSON states as themselves.
func (s State) MarshalJSON() ([]byte, error) {
	if s.IsJSON() {
		return s.JSON, nil
	}
	return json.Marshal(s.Text)
}

// UnmarshalJSON accepts a string, object or array. Use the parsers of this
// package for field-level validation; this method exists for round trips of
// already validated data (queue envelopes, stored results).
func (s *State) UnmarshalJSON(b []byte) error {
	var errs fieldErrs
	st, _ := parseState(b, "state", 0, &errs)
	if err := errs.err(); err != nil {
		return err
	}
	*s = st
	return nil
}

// parseState validates and decodes a state value. maxBytes <= 0 means no limit.
func parseState(raw json.RawMessage, path string, maxBytes int, errs *fieldErrs) (State, bool) {
	raw = bytes.TrimSpace(raw)
	// A cheap guard before decoding. Escapes make the raw form up to six
	// times larger than the state (\u00e9 for é, \u0026 for &), so the
	// exact limit is checked on the decoded text or canonical JSON below.
	if maxBytes > 0 && len(raw) > 6*maxBytes+2 {
		errs.addLarge(path, "is %d bytes, limit is %d", len(raw), maxBytes)
		return State{}, false
	}
	switch kindOf(raw) {
	case "string":
		txt, ok := stringField(raw, path, errs)
		if !ok {
			return State{}, false
		}
		if strings.TrimSpace(txt) == "" {
			errs.add(path, "must not be empty or whitespace")
			return State{}, false
		}
		if maxBytes > 0 && len(txt) > maxBytes {
			errs.addLarge(path, "is %d bytes, limit is %d", len(txt), maxBytes)
			return State{}, false
		}
		return State{Text: txt}, true
	case "object", "array":
		c, err := canonicalJSON(raw, false)
		if err != nil {
			errs.add(path, "%v", err)
			return State{}, false
		}
		if string(c) == "{}" || string(c) == "[]" {
			errs.add(path, "must not be an empty %s", kindOf(raw))
			return State{}, false
		}
		if maxBytes > 0 && len(c) > maxBytes {
			errs.addLarge(path, "is %d bytes, limit is %d", len(c), maxBytes)
			return State{}, false
		}
		return State{JSON: c}, true
	default:
		errs.add(path, "must be a non-empty string, object or array, got %s", kindOf(raw))
		return State{}, false
	}
}
