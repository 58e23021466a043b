package decision_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

func unmarshalState(t *testing.T, raw string) decision.State {
	t.Helper()
	var s decision.State
	require.NoError(t, json.Unmarshal([]byte(raw), &s))
	return s
}

func TestStateCanonical(t *testing.T) {
	t.Parallel()
	a := unmarshalState(t, `{"b": 1, "a": [1, 2.50, {"y": true, "x": null}]}`)
	b := unmarshalState(t, "{\n  \"a\" : [ 1 , 2.50 , { \"x\" : null , \"y\" : true } ] ,\n  \"b\" : 1\n}")
	require.Equal(t, string(a.Canonical()), string(b.Canonical()))
	require.Equal(t, a, b)
	require.Equal(t, `json:{"a":[1,2.50,{"x":null,"y":true}],"b":1}`, string(a.Canonical()))

	// Numbers keep their literal text: 2.50 and 2.5 are different states.
	c := unmarshalState(t, `{"b": 1, "a": [1, 2.5, {"y": true, "x": null}]}`)
	require.NotEqual(t, string(a.Canonical()), string(c.Canonical()))

	// Text and JSON never collide, even with the same bytes.
	text := decision.TextState(`{"a":[1,2.50,{"x":null,"y":true}],"b":1}`)
	require.NotEqual(t, string(a.Canonical()), string(text.Canonical()))
	require.Equal(t, `text:{"a":[1,2.50,{"x":null,"y":true}],"b":1}`, string(text.Canonical()))

	// Canonical does not alias the state's bytes.
	can := a.Canonical()
	can[len(can)-1] = 'X'
	require.Equal(t, `{"a":[1,2.50,{"x":null,"y":true}],"b":1}`, string(a.JSON))
}

func TestStateRender(t *testing.T) {
	t.Parallel()
	s := unmarshalState(t, `{"b": 1, "a": [1, "<x>"], "c": {}}`)
	require.Equal(t, "{\n  \"a\": [\n    1,\n    \"<x>\"\n  ],\n  \"b\": 1,\n  \"c\": {}\n}", s.Render())
	require.Equal(t, "line one\n  line two ", decision.TextState("line one\n  line two ").Render())
	arr := unmarshalState(t, `[ "a" ]`)
	require.Equal(t, "[\n  \"a\"\n]", arr.Render())
}

func TestStateAccessors(t *testing.T) {
	t.Parallel()
	var zero decision.State
	require.True(t, zero.IsZero())
	require.False(t, zero.IsJSON())
	require.Equal(t, 0, zero.Len())

	txt := decision.TextState("héllo")
	require.False(t, txt.IsZero())
	require.False(t, txt.IsJSON())
	require.Equal(t, 6, txt.Len())

	js := unmarshalState(t, ` { "a" : 1 } `)
	require.False(t, js.IsZero())
	require.True(t, js.IsJSON())
	require.Equal(t, len(`{"a":1}`), js.Len())
}

func TestStateJSONRoundTrip(t *testing.T) {
	t.Parallel()
	states := []decision.State{
		decision.TextState("plain"),
		decision.TextState("quotes \" backslash \\ newline \n tab \t unicode é ✓ \u2028 <html>&"),
		decision.TextState(`{"looks":"like json"}`),
		unmarshalState(t, `{"z": [1, 1e400, -0.0, "\u00e9\u2028<&>"], "a": {"nested": [[], {}]}}`),
		unmarshalState(t, `[1, "two", {"three": 3}]`),
	}
	for _, s := range states {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		require.True(t, json.Valid(b), string(b))
		var back decision.State
		require.NoError(t, json.Unmarshal(b, &back), string(b))
		require.Equal(t, s, back)
		require.Equal(t, s.Canonical(), back.Canonical())

		// Inside a struct as well (queue envelopes carry whole decisions).
		d := decision.Decision{ID: "d", State: s, Question: "q?", Options: []decision.Option{{ID: "a"}, {ID: "b"}}}
		db, err := json.Marshal(d)
		require.NoError(t, err)
		var dBack decision.Decision
		require.NoError(t, json.Unmarshal(db, &dBack))
		require.Equal(t, d, dBack)
	}
	// A text state marshals as a JSON string, a JSON state as itself.
	b, err := json.Marshal(decision.TextState(`{"a":1}`))
	require.NoError(t, err)
	require.Equal(t, `"{\"a\":1}"`, string(b))
	b, err = json.Marshal(unmarshalState(t, `{"a": 1}`))
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(b))
}

func TestStateUnmarshalRejects(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`""`, `"  "`, `{}`, `[]`, `5`, `true`, `null`} {
		var s decision.State
		err := s.UnmarshalJSON([]byte(raw))
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"state"}, paths(t, err), raw)
		require.True(t, s.IsZero(), raw)
	}
	// No size limit applies on this path: it re-reads validated data.
	big := `"` + strings.Repeat("x", 300<<10) + `"`
	var s decision.State
	require.NoError(t, s.UnmarshalJSON([]byte(big)))
	require.Equal(t, 300<<10, s.Len())
}
