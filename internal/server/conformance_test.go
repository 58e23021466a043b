package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/server"
)

// fixture is one conformance case of testdata/conformance: a request and
// the shape of its expected response.
//
// A shape is JSON in which these strings stand for a class of values:
// "<string>", "<int>" (an integer literal), "<float>" (a number literal
// with a decimal point or exponent, as strict clients need), "<prob>" (a
// <float> in [0, 1]), "<any>". Objects must have exactly the shape's keys,
// in the shape's order, unless the shape has the key "..." (then other
// keys may follow). Arrays must match element by element.
type fixture struct {
	Description string `json:"description"`
	Request     struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"request"`
	Response struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`
}

func loadFixtures(t *testing.T) map[string]fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]fixture{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var fx fixture
		require.NoError(t, json.Unmarshal(b, &fx), f)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = fx
	}
	return out
}

// runFixture sends a fixture's request to url and checks the answer.
func runFixture(t *testing.T, url string, fx fixture) {
	t.Helper()
	var body []byte
	if len(fx.Request.Body) > 0 {
		body = fx.Request.Body
		if body[0] == '"' { // a raw (possibly invalid) body given as a string
			var s string
			require.NoError(t, json.Unmarshal(body, &s))
			body = []byte(s)
		}
	}
	var hdr []string
	for k, v := range fx.Request.Headers {
		hdr = append(hdr, k, v)
	}
	r := do(t, fx.Request.Method, url+fx.Request.Path, body, hdr...)
	require.Equal(t, fx.Response.Status, r.status, "%s\nbody: %s", fx.Description, r.body)
	for k, want := range fx.Response.Headers {
		got := r.header.Get(k)
		if want == "<string>" {
			require.NotEmpty(t, got, "header %s", k)
		} else {
			require.Equal(t, want, got, "header %s", k)
		}
	}
	want := decodeOrdered(t, fx.Response.Body)
	got := decodeOrdered(t, bytes.TrimSpace(r.body))
	if err := matchShape(want, got, "$"); err != nil {
		t.Fatalf("%s\n%v\nbody: %s", fx.Description, err, r.body)
	}
}

func TestConformanceFixtures(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{MaxBodyBytes: 16 << 10})
	for name, fx := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runFixture(t, b.url, fx)
		})
	}
}

// The shape matcher must itself be able to fail.
func TestMatchShapeRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ shape, body string }{
		{`{"a":"<float>"}`, `{"a":1}`},
		{`{"a":"<int>"}`, `{"a":1.0}`},
		{`{"a":"<prob>"}`, `{"a":1.5}`},
		{`{"a":"<string>"}`, `{"a":2}`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{`{"a":1}`, `{"a":1,"b":2}`},
		{`{"a":1,"...":"<any>"}`, `{"b":2}`},
		{`["<any>"]`, `[1,2]`},
		{`{"k":{"0":"<string>"}}`, `{"k":{"1":"x"}}`},
	} {
		err := matchShape(decodeOrdered(t, []byte(c.shape)), decodeOrdered(t, []byte(c.body)), "$")
		require.Error(t, err, "%s vs %s", c.shape, c.body)
	}
	require.NoError(t, matchShape(decodeOrdered(t, []byte(`{"a":"<float>","...":"<any>"}`)), decodeOrdered(t, []byte(`{"a":1e-7,"z":[1]}`)), "$"))
}

// jv is a JSON value that keeps object key order and number literals.
type jv struct {
	kind byte // '{', '[', 's' string, 'n' number, 'b' bool, '0' null
	keys []string
	vals []jv
	lit  string
}

func decodeOrdered(t *testing.T, b []byte) jv {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := readValue(dec)
	require.NoError(t, err, "%s", b)
	_, err = dec.Token()
	require.ErrorIs(t, err, io.EOF, "trailing data in %s", b)
	return v
}

func readValue(dec *json.Decoder) (jv, error) {
	tok, err := dec.Token()
	if err != nil {
		return jv{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '{' {
			v := jv{kind: '{'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jv{}, err
				}
				val, err := readValue(dec)
				if err != nil {
					return jv{}, err
				}
				v.keys = append(v.keys, kt.(string))
				v.vals = append(v.vals, val)
			}
			_, err := dec.Token()
			return v, err
		}
		v := jv{kind: '['}
		for dec.More() {
			val, err := readValue(dec)
			if err != nil {
				return jv{}, err
			}
			v.vals = append(v.vals, val)
		}
		_, err := dec.Token()
		return v, err
	case string:
		return jv{kind: 's', lit: x}, nil
	case json.Number:
		return jv{kind: 'n', lit: x.String()}, nil
	case bool:
		return jv{kind: 'b', lit: strconv.FormatBool(x)}, nil
	default:
		return jv{kind: '0'}, nil
	}
}

func matchShape(want, got jv, path string) error {
	if want.kind == 's' && strings.HasPrefix(want.lit, "<") && strings.HasSuffix(want.lit, ">") {
		switch want.lit {
		case "<any>":
			return nil
		case "<string>":
			if got.kind != 's' {
				return fmt.Errorf("%s: want a string", path)
			}
			return nil
		case "<int>":
			if got.kind != 'n' || strings.ContainsAny(got.lit, ".eE") {
				return fmt.Errorf("%s: want an integer literal, got %q", path, got.lit)
			}
			return nil
		case "<float>", "<prob>":
			if got.kind != 'n' || !strings.ContainsAny(got.lit, ".eE") {
				return fmt.Errorf("%s: want a float literal (with a decimal point), got %q", path, got.lit)
			}
			if want.lit == "<prob>" {
				f, _ := strconv.ParseFloat(got.lit, 64)
				if f < 0 || f > 1 {
					return fmt.Errorf("%s: want a probability, got %s", path, got.lit)
				}
			}
			return nil
		}
	}
	if want.kind != got.kind {
		return fmt.Errorf("%s: want kind %c, got %c", path, want.kind, got.kind)
	}
	switch want.kind {
	case '{':
		open := false
		var keys []string
		for i, k := range want.keys {
			if k == "..." {
				open = true
				continue
			}
			keys = append(keys, k)
			j := indexOf(got.keys, k)
			if j < 0 {
				return fmt.Errorf("%s: missing key %q (has %v)", path, k, got.keys)
			}
			if err := matchShape(want.vals[i], got.vals[j], path+"."+k); err != nil {
				return err
			}
		}
		// Order: the shape's keys appear in the same order.
		last := -1
		for _, k := range keys {
			j := indexOf(got.keys, k)
			if j < last {
				return fmt.Errorf("%s: key %q out of order (got order %v)", path, k, got.keys)
			}
			last = j
		}
		if !open && len(got.keys) != len(keys) {
			return fmt.Errorf("%s: unexpected keys: got %v, want %v", path, got.keys, keys)
		}
	case '[':
		if len(want.vals) != len(got.vals) {
			return fmt.Errorf("%s: want %d elements, got %d", path, len(want.vals), len(got.vals))
		}
		for i := range want.vals {
			if err := matchShape(want.vals[i], got.vals[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		if want.lit != got.lit {
			return fmt.Errorf("%s: want %s, got %s", path, want.lit, got.lit)
		}
	}
	return nil
}

func indexOf(xs []string, x string) int {
	for i, s := range xs {
		if s == x {
			return i
		}
	}
	return -1
}
