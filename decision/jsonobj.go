package decision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// member is one key/value pair of a JSON object, in document order.
type member struct {
	Key   string
	Value json.RawMessage
}

// kindOf names the JSON type of a raw value for error messages.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// checkJSON reports a syntax error in data, or trailing data after the value.
func checkJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return malformed("", errors.New("empty body"))
		}
		return malformed("", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return malformed("", errors.New("unexpected data after the JSON value"))
	}
	return nil
}

// objectMembers splits a raw JSON object into its members, keeping their
// order. Duplicate keys are an error (encoding/json would silently keep the
// last one). The value must already be syntactically valid JSON.
func objectMembers(raw json.RawMessage, path string, errs *fieldErrs) ([]member, bool) {
	if kindOf(raw) != "object" {
		errs.add(path, "must be an object, got %s", kindOf(raw))
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		errs.add(path, "%v", err)
		return nil, false
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			errs.add(path, "%v", err)
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			errs.add(join(path, key), "%v", err)
			return nil, false
		}
		if seen[key] {
			errs.add(join(path, key), "duplicate key")
			continue
		}
		seen[key] = true
		out = append(out, member{Key: key, Value: v})
	}
	return out, true
}

// arrayElems splits a raw JSON array into its elements.
func arrayElems(raw json.RawMessage, path string, errs *fieldErrs) ([]json.RawMessage, bool) {
	if kindOf(raw) != "array" {
		errs.add(path, "must be an array, got %s", kindOf(raw))
		return nil, false
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		errs.add(path, "%v", err)
		return nil, false
	}
	return out, true
}

// stringField decodes a JSON string at path.
func stringField(raw json.RawMessage, path string, errs *fieldErrs) (string, bool) {
	if kindOf(raw) != "string" {
		errs.add(path, "must be a string, got %s", kindOf(raw))
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		errs.add(path, "%v", err)
		return "", false
	}
	return s, true
}

// canonicalJSON re-encodes a JSON value with object keys sorted and
// insignificant whitespace removed; numbers keep their literal text.
func canonicalJSON(raw json.RawMessage, indent bool) ([]byte, error) {
	if key, dup := duplicateKey(raw); dup {
		return nil, fmt.Errorf("duplicate key %q", key)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// duplicateKey reports the first key that occurs twice in one object of a
// JSON value (decoding into a map would silently keep the last one).
func duplicateKey(raw json.RawMessage) (string, bool) {
	type frame struct {
		keys    map[string]bool // nil for arrays
		wantKey bool
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil { // io.EOF, or a syntax error canonicalJSON reports
			return "", false
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				f := frame{wantKey: d == '{'}
				if d == '{' {
					f.keys = map[string]bool{}
				}
				stack = append(stack, f)
				continue
			}
			stack = stack[:len(stack)-1]
		} else if n := len(stack); n > 0 && stack[n-1].wantKey {
			key, _ := tok.(string)
			if stack[n-1].keys[key] {
				return key, true
			}
			stack[n-1].keys[key] = true
			stack[n-1].wantKey = false
			continue
		}
		// A value ended; in an object, a key comes next.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
}
