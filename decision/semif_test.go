package decision_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

func TestParseSemIfValid(t *testing.T) {
	t.Parallel()
	body := `{
	  "id": "support-route",
	  "kind": "routing",
	  "state": "Customer asks to reset a forgotten password.",
	  "question": "Which queue should handle this request?",
	  "options": [
	    {"id": "account_access", "description": "Account access and authentication support."},
	    {"id": "billing", "description": "Billing and payment support."},
	    {"description": "Sales and product evaluation.", "id": "sales"}
	  ],
	  "metadata": {"tenant": "acme", "channel": "email"},
	  "route": "gpu",
	  "priority": "interactive"
	}`
	ds, shape, err := decision.ParseSemIf([]byte(body), decision.Limits{})
	require.NoError(t, err)
	require.Equal(t, decision.ShapeBare, shape)
	require.Equal(t, []decision.Decision{{
		ID:       "support-route",
		Kind:     "routing",
		State:    decision.TextState("Customer asks to reset a forgotten password."),
		Question: "Which queue should handle this request?",
		Options: []decision.Option{
			{ID: "account_access", Description: "Account access and authentication support."},
			{ID: "billing", Description: "Billing and payment support."},
			{ID: "sales", Description: "Sales and product evaluation."},
		},
		Metadata: map[string]string{"tenant": "acme", "channel": "email"},
		Route:    decision.RouteGPU,
		Priority: decision.PriorityInteractive,
	}}, ds)
	require.Equal(t, []string{"account_access", "billing", "sales"}, ds[0].OptionIDs())
	require.NoError(t, ds[0].Validate(decision.Limits{}, ""))
}

// TestParseSemIfFieldErrors drives every validation path of a single
// decision and asserts the exact field paths reported.
func TestParseSemIfFieldErrors(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("x", n) }
	dupOpts := []any{
		map[string]any{"id": "a", "description": "A."},
		map[string]any{"id": "billing", "description": "B."},
		map[string]any{"id": "c", "description": "C."},
		map[string]any{"id": "billing", "description": "B again."},
	}
	manyMeta := map[string]any{}
	for i := range 33 {
		manyMeta[fmt.Sprintf("k%02d", i)] = "v"
	}
	tests := []struct {
		name  string
		body  map[string]any
		paths []string // nil: valid
		class error
		msg   string // substring of the message at paths[0]
	}{
		{name: "valid", body: semif()},
		{name: "state empty", body: semif(set("state", "")), paths: []string{"state"}, class: decision.ErrInvalid, msg: "empty"},
		{name: "state whitespace", body: semif(set("state", " \n\t ")), paths: []string{"state"}, class: decision.ErrInvalid},
		{name: "state missing", body: semif(set("state", deleted)), paths: []string{"state"}, class: decision.ErrInvalid, msg: "required"},
		{name: "state object", body: semif(set("state", map[string]any{"a": 1}))},
		{name: "state array", body: semif(set("state", []any{1, "x"}))},
		{name: "state empty object", body: semif(set("state", map[string]any{})), paths: []string{"state"}, class: decision.ErrInvalid, msg: "empty object"},
		{name: "state empty array", body: semif(set("state", []any{})), paths: []string{"state"}, class: decision.ErrInvalid, msg: "empty array"},
		{name: "state duplicate key", body: semif(set("state", rawJSON(`{"a":1,"b":{"c":2,"c":3}}`))), paths: []string{"state"}, class: decision.ErrInvalid, msg: `duplicate key "c"`},
		{name: "state number", body: semif(set("state", 42)), paths: []string{"state"}, class: decision.ErrInvalid, msg: "number"},
		{name: "state null", body: semif(set("state", nil)), paths: []string{"state"}, class: decision.ErrInvalid, msg: "null"},
		{name: "state bool", body: semif(set("state", true)), paths: []string{"state"}, class: decision.ErrInvalid, msg: "boolean"},
		{name: "question empty", body: semif(set("question", "")), paths: []string{"question"}, class: decision.ErrInvalid},
		{name: "question whitespace", body: semif(set("question", "  \t")), paths: []string{"question"}, class: decision.ErrInvalid},
		{name: "question missing", body: semif(set("question", deleted)), paths: []string{"question"}, class: decision.ErrInvalid, msg: "required"},
		{name: "question number", body: semif(set("question", 7)), paths: []string{"question"}, class: decision.ErrInvalid, msg: "string"},
		{name: "question too large", body: semif(set("question", long(16<<10+1))), paths: []string{"question"}, class: decision.ErrTooLarge},
		{name: "question at limit", body: semif(set("question", long(16<<10)))},
		{name: "options missing", body: semif(set("options", deleted)), paths: []string{"options"}, class: decision.ErrInvalid, msg: "required"},
		{name: "options not array", body: semif(set("options", "a,b")), paths: []string{"options"}, class: decision.ErrInvalid, msg: "array"},
		{name: "0 options", body: semif(set("options", opts(0))), paths: []string{"options"}, class: decision.ErrInvalid},
		{name: "1 option", body: semif(set("options", opts(1))), paths: []string{"options"}, class: decision.ErrInvalid, msg: "at least 2"},
		{name: "2 options", body: semif(set("options", opts(2)))},
		{name: "255 options", body: semif(set("options", opts(255)))},
		{name: "256 options", body: semif(set("options", opts(256))), paths: []string{"options"}, class: decision.ErrInvalid, msg: "at most 255"},
		{name: "option not object", body: semif(set("options", []any{"a", opts(2)[1], opts(3)[2]})), paths: []string{"options[0]"}, class: decision.ErrInvalid, msg: "object"},
		{name: "duplicate option id", body: semif(set("options", dupOpts)), paths: []string{"options[3].id"}, class: decision.ErrInvalid, msg: `duplicate "billing"`},
		{name: "option id empty", body: semif(setOpt(1, "id", "")), paths: []string{"options[1].id"}, class: decision.ErrInvalid},
		{name: "option id whitespace", body: semif(setOpt(1, "id", "   ")), paths: []string{"options[1].id"}, class: decision.ErrInvalid},
		{name: "option id padded left", body: semif(setOpt(0, "id", " billing2")), paths: []string{"options[0].id"}, class: decision.ErrInvalid, msg: "whitespace"},
		{name: "option id padded right", body: semif(setOpt(2, "id", "sales\t")), paths: []string{"options[2].id"}, class: decision.ErrInvalid, msg: "whitespace"},
		{name: "option id control char", body: semif(setOpt(2, "id", "sa\x01les")), paths: []string{"options[2].id"}, class: decision.ErrInvalid, msg: "control"},
		{name: "option id newline inside", body: semif(setOpt(2, "id", "sa\nles")), paths: []string{"options[2].id"}, class: decision.ErrInvalid, msg: "control"},
		{name: "option id C1 control", body: semif(setOpt(2, "id", "sa\u0085les")), paths: []string{"options[2].id"}, class: decision.ErrInvalid, msg: "control"},
		{name: "option id 128 bytes", body: semif(setOpt(0, "id", long(128)))},
		{name: "option id 129 bytes", body: semif(setOpt(0, "id", long(129))), paths: []string{"options[0].id"}, class: decision.ErrInvalid, msg: "129 bytes"},
		{name: "option id unicode", body: semif(setOpt(0, "id", "café"))},
		{name: "option id number", body: semif(setOpt(0, "id", 1)), paths: []string{"options[0].id"}, class: decision.ErrInvalid, msg: "string"},
		{name: "option id missing", body: semif(setOpt(1, "id", deleted)), paths: []string{"options[1].id"}, class: decision.ErrInvalid, msg: "required"},
		{name: "description missing", body: semif(setOpt(1, "description", deleted)), paths: []string{"options[1].description"}, class: decision.ErrInvalid, msg: "required"},
		{name: "description empty allowed", body: semif(setOpt(1, "description", ""))},
		{name: "description null", body: semif(setOpt(1, "description", nil)), paths: []string{"options[1].description"}, class: decision.ErrInvalid, msg: "string"},
		{name: "description at limit", body: semif(setOpt(0, "description", long(4<<10)))},
		{name: "description too large", body: semif(setOpt(0, "description", long(4<<10+1))), paths: []string{"options[0].description"}, class: decision.ErrTooLarge},
		{name: "option unknown field", body: semif(setOpt(2, "label", "C")), paths: []string{"options[2].label"}, class: decision.ErrInvalid, msg: "unknown field"},
		{name: "unknown top-level field", body: semif(set("metdata", map[string]any{"a": "b"})), paths: []string{"metdata"}, class: decision.ErrInvalid, msg: "unknown field"},
		{name: "metadata ok", body: semif(set("metadata", map[string]any{"tenant": "acme"}))},
		{name: "metadata empty", body: semif(set("metadata", map[string]any{}))},
		{name: "metadata not object", body: semif(set("metadata", "tenant=acme")), paths: []string{"metadata"}, class: decision.ErrInvalid, msg: "object"},
		{name: "metadata array", body: semif(set("metadata", []any{"a"})), paths: []string{"metadata"}, class: decision.ErrInvalid, msg: "object"},
		{name: "metadata number value", body: semif(set("metadata", map[string]any{"tenant": 5})), paths: []string{"metadata.tenant"}, class: decision.ErrInvalid, msg: "string"},
		{name: "metadata object value", body: semif(set("metadata", map[string]any{"a": "x", "nested": map[string]any{}})), paths: []string{"metadata.nested"}, class: decision.ErrInvalid},
		{name: "metadata 33 entries", body: semif(set("metadata", manyMeta)), paths: []string{"metadata"}, class: decision.ErrInvalid, msg: "33 entries"},
		{name: "metadata value too long", body: semif(set("metadata", map[string]any{"k": long(1025)})), paths: []string{"metadata.k"}, class: decision.ErrInvalid},
		{name: "metadata key too long", body: semif(set("metadata", map[string]any{long(1025): "v"})), paths: []string{"metadata." + long(1025)}, class: decision.ErrInvalid},
		{name: "route cpu", body: semif(set("route", "cpu"))},
		{name: "route gpu", body: semif(set("route", "gpu"))},
		{name: "route empty", body: semif(set("route", ""))},
		{name: "route unknown", body: semif(set("route", "tpu")), paths: []string{"route"}, class: decision.ErrInvalid, msg: `"tpu"`},
		{name: "route upper case", body: semif(set("route", "GPU")), paths: []string{"route"}, class: decision.ErrInvalid},
		{name: "route number", body: semif(set("route", 1)), paths: []string{"route"}, class: decision.ErrInvalid, msg: "string"},
		{name: "priority interactive", body: semif(set("priority", "interactive"))},
		{name: "priority batch", body: semif(set("priority", "batch"))},
		{name: "priority unknown", body: semif(set("priority", "urgent")), paths: []string{"priority"}, class: decision.ErrInvalid, msg: `"urgent"`},
		{name: "priority null", body: semif(set("priority", nil)), paths: []string{"priority"}, class: decision.ErrInvalid},
		{name: "id missing", body: semif(set("id", deleted))},
		{name: "id 256 bytes", body: semif(set("id", long(256)))},
		{name: "id 257 bytes", body: semif(set("id", long(257))), paths: []string{"id"}, class: decision.ErrInvalid},
		{name: "id padded", body: semif(set("id", "x ")), paths: []string{"id"}, class: decision.ErrInvalid},
		{name: "id number", body: semif(set("id", 3)), paths: []string{"id"}, class: decision.ErrInvalid, msg: "string"},
		{name: "kind number", body: semif(set("kind", 3)), paths: []string{"kind"}, class: decision.ErrInvalid, msg: "string"},
		{name: "state text at limit", body: semif(set("state", long(256<<10)))},
		{name: "state text over limit", body: semif(set("state", long(256<<10+1))), paths: []string{"state"}, class: decision.ErrTooLarge, msg: "limit"},
		{name: "state JSON over limit", body: semif(set("state", map[string]any{"k": long(256 << 10)})), paths: []string{"state"}, class: decision.ErrTooLarge},
		{
			name:  "several problems together",
			body:  semif(set("kind", 1), setOpt(0, "description", deleted), setOpt(2, "id", 9), set("colour", "red")),
			paths: []string{"colour", "kind", "options[0].description", "options[2].id"},
			class: decision.ErrInvalid,
		},
		{
			name:  "too large wins the class",
			body:  semif(set("state", long(256<<10+1)), set("colour", "red")),
			paths: []string{"colour", "state"},
			class: decision.ErrTooLarge,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := mustJSON(t, tc.body)
			ds, shape, err := decision.ParseSemIf(body, decision.Limits{})
			require.Equal(t, decision.ShapeBare, shape)
			if tc.paths == nil {
				require.NoError(t, err)
				require.Len(t, ds, 1)
				require.NoError(t, ds[0].Validate(decision.Limits{}, ""))
				return
			}
			require.Nil(t, ds)
			requireClass(t, err, tc.class)
			require.ElementsMatch(t, tc.paths, paths(t, err), "error: %v", err)
			if tc.msg != "" {
				require.Contains(t, messageAt(t, err, tc.paths[0]), tc.msg)
			}
			// ParseSemIfDecision reports the same problems.
			_, err2 := decision.ParseSemIfDecision(body, decision.Limits{})
			require.Equal(t, err.Error(), err2.Error())
		})
	}
}

// TestParseSemIfReportsAllProblems: doc.go promises that all problems of a
// request are reported together. Problems found while decoding fields and
// problems found by the rule checks (Decision.validate) must appear in one
// error.
func TestParseSemIfReportsAllProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  map[string]any
		paths []string
	}{
		{"empty state and empty question", semif(set("state", ""), set("question", "")), []string{"state", "question"}},
		{"unknown field and one option", semif(set("colour", "red"), set("options", opts(1))), []string{"colour", "options"}},
		{"missing description and duplicate id", semif(setOpt(0, "description", deleted), setOpt(2, "id", "billing")), []string{"options[0].description", "options[2].id"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := decision.ParseSemIf(mustJSON(t, tc.body), decision.Limits{})
			requireClass(t, err, decision.ErrInvalid)
			require.ElementsMatch(t, tc.paths, paths(t, err), "error: %v", err)
		})
	}
}

func TestParseSemIfStateCanonical(t *testing.T) {
	t.Parallel()
	body := `{"state": {"b": 1.50, "a": [1, 2e3, {"d": null, "c": "x<y"}], "n": 12345678901234567890},
	          "question": "q?", "options": [{"id": "a", "description": ""}, {"id": "b", "description": ""}]}`
	ds, _, err := decision.ParseSemIf([]byte(body), decision.Limits{})
	require.NoError(t, err)
	st := ds[0].State
	require.True(t, st.IsJSON())
	require.Empty(t, st.Text)
	require.Equal(t, `{"a":[1,2e3,{"c":"x<y","d":null}],"b":1.50,"n":12345678901234567890}`, string(st.JSON))
	require.Equal(t, len(st.JSON), st.Len())

	arr := `{"state": [ {"z": 1, "y": 2}, "t" ], "question": "q?", "options": [{"id": "a", "description": ""}, {"id": "b", "description": ""}]}`
	ds, _, err = decision.ParseSemIf([]byte(arr), decision.Limits{})
	require.NoError(t, err)
	require.Equal(t, `[{"y":2,"z":1},"t"]`, string(ds[0].State.JSON))
}

func TestParseSemIfConfigurableLimits(t *testing.T) {
	t.Parallel()
	lim := decision.Limits{MaxStateBytes: 10, MaxOptions: 3, MaxOptionIDBytes: 4, MaxIDBytes: 5}

	_, _, err := decision.ParseSemIf(mustJSON(t, semif(set("id", "d"), set("state", "0123456789"), set("options", opts(3)))), lim)
	require.NoError(t, err)

	_, _, err = decision.ParseSemIf(mustJSON(t, semif(set("id", "d"), set("state", "0123456789A"), set("options", opts(3)))), lim)
	requireClass(t, err, decision.ErrTooLarge)
	require.Equal(t, []string{"state"}, paths(t, err))

	// A JSON state is measured canonically: {"a":"12345"} is 13 bytes.
	_, _, err = decision.ParseSemIf(mustJSON(t, semif(set("id", "d"), set("state", map[string]any{"a": "12345"}), set("options", opts(3)))), lim)
	requireClass(t, err, decision.ErrTooLarge)
	require.Equal(t, []string{"state"}, paths(t, err))

	_, _, err = decision.ParseSemIf(mustJSON(t, semif(set("id", "d"), set("state", "s"), set("options", opts(4)))), lim)
	requireClass(t, err, decision.ErrInvalid)
	require.Equal(t, []string{"options"}, paths(t, err))

	_, _, err = decision.ParseSemIf(mustJSON(t, semif(set("id", "d"), set("options", opts(3)), setOpt(0, "id", "abcde"))), decision.Limits{MaxOptionIDBytes: 4})
	require.Equal(t, []string{"options[0].id"}, paths(t, err))

	_, _, err = decision.ParseSemIf(mustJSON(t, semif(set("id", "abcdef"), set("state", "s"), set("options", opts(3)))), lim)
	require.Equal(t, []string{"id"}, paths(t, err))

	l := decision.DefaultLimits()
	require.Equal(t, 256<<10, l.MaxStateBytes)
	require.Equal(t, 2, l.MinOptions)
	require.Equal(t, 255, l.MaxOptions)
	require.Equal(t, 64, l.MaxDecisions)
	require.Equal(t, 10, l.MaxScoreLevels)
	l2 := decision.DefaultLimits()
	l2.MaxStateBytes = 10
	require.NotEqual(t, l, l2)
}

func TestParseSemIfEnvelopes(t *testing.T) {
	t.Parallel()
	one := semif()
	noID := semif(set("id", deleted))

	t.Run("wrapped", func(t *testing.T) {
		t.Parallel()
		ds, shape, err := decision.ParseSemIf(mustJSON(t, map[string]any{"decision": one}), decision.Limits{})
		require.NoError(t, err)
		require.Equal(t, decision.ShapeWrapped, shape)
		require.Len(t, ds, 1)
		require.Equal(t, "support-route", ds[0].ID)

		d, err := decision.ParseSemIfDecision(mustJSON(t, map[string]any{"decision": one}), decision.Limits{})
		require.NoError(t, err)
		require.Equal(t, ds[0], d)
	})
	t.Run("wrapped errors carry the prefix", func(t *testing.T) {
		t.Parallel()
		_, shape, err := decision.ParseSemIf(mustJSON(t, map[string]any{"decision": semif(setOpt(1, "x", 1))}), decision.Limits{})
		require.Equal(t, decision.ShapeWrapped, shape)
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decision.options[1].x"}, paths(t, err))
	})
	t.Run("wrapped not an object", func(t *testing.T) {
		t.Parallel()
		_, _, err := decision.ParseSemIf([]byte(`{"decision": "x"}`), decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decision"}, paths(t, err))
	})
	t.Run("extra key beside decision", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{
			`{"decision": ` + string(mustJSON(t, one)) + `, "trace": "x"}`,
			`{"trace": "x", "decision": ` + string(mustJSON(t, one)) + `}`,
		} {
			_, _, err := decision.ParseSemIf([]byte(body), decision.Limits{})
			requireClass(t, err, decision.ErrInvalid)
			require.Equal(t, []string{"decision"}, paths(t, err))
			require.Contains(t, messageAt(t, err, "decision"), "only top-level field")
		}
	})
	t.Run("extra key beside decisions", func(t *testing.T) {
		t.Parallel()
		body := `{"decisions": [` + string(mustJSON(t, one)) + `], "state": "x"}`
		_, _, err := decision.ParseSemIf([]byte(body), decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions"}, paths(t, err))
	})
	t.Run("batch assigns missing ids", func(t *testing.T) {
		t.Parallel()
		body := mustJSON(t, map[string]any{"decisions": []any{noID, semif(set("id", "mine")), noID}})
		ds, shape, err := decision.ParseSemIf(body, decision.Limits{})
		require.NoError(t, err)
		require.Equal(t, decision.ShapeBatch, shape)
		require.Equal(t, []string{"0", "mine", "2"}, []string{ds[0].ID, ds[1].ID, ds[2].ID})
	})
	t.Run("batch duplicate ids", func(t *testing.T) {
		t.Parallel()
		body := mustJSON(t, map[string]any{"decisions": []any{one, semif(set("id", "x")), one}})
		_, _, err := decision.ParseSemIf(body, decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions[2].id"}, paths(t, err))
		require.Contains(t, messageAt(t, err, "decisions[2].id"), `duplicate "support-route"`)
		require.Contains(t, messageAt(t, err, "decisions[2].id"), "decisions[0]")
	})
	t.Run("batch assigned id collides with explicit id", func(t *testing.T) {
		t.Parallel()
		body := mustJSON(t, map[string]any{"decisions": []any{semif(set("id", "1")), noID}})
		_, _, err := decision.ParseSemIf(body, decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions[1].id"}, paths(t, err))
	})
	t.Run("batch element errors", func(t *testing.T) {
		t.Parallel()
		body := mustJSON(t, map[string]any{"decisions": []any{one, semif(set("question", " ")), semif(set("id", "z"), setOpt(0, "id", ""))}})
		_, _, err := decision.ParseSemIf(body, decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions[1].question", "decisions[2].options[0].id"}, paths(t, err))
	})
	t.Run("empty batch", func(t *testing.T) {
		t.Parallel()
		_, shape, err := decision.ParseSemIf([]byte(`{"decisions": []}`), decision.Limits{})
		require.Equal(t, decision.ShapeBatch, shape)
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions"}, paths(t, err))
	})
	t.Run("batch not an array", func(t *testing.T) {
		t.Parallel()
		_, _, err := decision.ParseSemIf([]byte(`{"decisions": {"a": 1}}`), decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions"}, paths(t, err))
	})
	t.Run("batch at and over MaxDecisions", func(t *testing.T) {
		t.Parallel()
		batch := func(n int) []byte {
			ds := make([]any, n)
			for i := range ds {
				ds[i] = noID
			}
			return mustJSON(t, map[string]any{"decisions": ds})
		}
		ds, _, err := decision.ParseSemIf(batch(64), decision.Limits{})
		require.NoError(t, err)
		require.Len(t, ds, 64)
		_, _, err = decision.ParseSemIf(batch(65), decision.Limits{})
		requireClass(t, err, decision.ErrTooLarge)
		require.Equal(t, []string{"decisions"}, paths(t, err))
		_, _, err = decision.ParseSemIf(batch(3), decision.Limits{MaxDecisions: 2})
		requireClass(t, err, decision.ErrTooLarge)
	})
	t.Run("ParseSemIfDecision refuses a batch", func(t *testing.T) {
		t.Parallel()
		_, err := decision.ParseSemIfDecision(mustJSON(t, map[string]any{"decisions": []any{one}}), decision.Limits{})
		requireClass(t, err, decision.ErrInvalid)
		require.Equal(t, []string{"decisions"}, paths(t, err))
	})
}

func TestParseSemIfRawJSON(t *testing.T) {
	t.Parallel()
	const opts2 = `"options":[{"id":"a","description":"A"},{"id":"b","description":"B"}]`
	tests := []struct {
		name  string
		body  string
		class error // nil: valid
		paths []string
	}{
		{name: "valid", body: `{"state":"s","question":"q",` + opts2 + `}`},
		{name: "trailing whitespace", body: "{\"state\":\"s\",\"question\":\"q\"," + opts2 + "}\n\t "},
		{name: "empty body", body: ``, class: decision.ErrMalformed},
		{name: "only whitespace", body: " \n", class: decision.ErrMalformed},
		{name: "truncated", body: `{"state":"s","question":`, class: decision.ErrMalformed},
		{name: "not JSON", body: `state=s`, class: decision.ErrMalformed},
		{name: "single quotes", body: `{'state':'s'}`, class: decision.ErrMalformed},
		{name: "trailing comma", body: `{"state":"s","question":"q",` + opts2 + `,}`, class: decision.ErrMalformed},
		{name: "trailing garbage", body: `{"state":"s","question":"q",` + opts2 + `} x`, class: decision.ErrMalformed},
		{name: "two objects", body: `{"state":"s","question":"q",` + opts2 + `}{}`, class: decision.ErrMalformed},
		{name: "trailing bracket", body: `{"state":"s","question":"q",` + opts2 + `}]`, class: decision.ErrMalformed},
		{name: "deep nesting", body: `{"state":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, class: decision.ErrMalformed},
		{name: "top-level array", body: `[{"state":"s"}]`, class: decision.ErrInvalid, paths: []string{""}},
		{name: "top-level null", body: `null`, class: decision.ErrInvalid, paths: []string{""}},
		{name: "top-level string", body: `"hello"`, class: decision.ErrInvalid, paths: []string{""}},
		{name: "empty object", body: `{}`, class: decision.ErrInvalid, paths: []string{"state", "question", "options"}},
		{name: "duplicate top-level key", body: `{"state":"s","state":"t","question":"q",` + opts2 + `}`, class: decision.ErrInvalid, paths: []string{"state"}},
		{name: "duplicate option key", body: `{"state":"s","question":"q","options":[{"id":"a","id":"c","description":"A"},{"id":"b","description":"B"}]}`, class: decision.ErrInvalid, paths: []string{"options[0].id"}},
		{name: "duplicate metadata key", body: `{"state":"s","question":"q",` + opts2 + `,"metadata":{"t":"1","t":"2"}}`, class: decision.ErrInvalid, paths: []string{"metadata.t"}},
		{name: "duplicate decision key", body: `{"decision":{"state":"s","question":"q",` + opts2 + `},"decision":{"state":"s","question":"q",` + opts2 + `}}`, class: decision.ErrInvalid, paths: []string{"decision"}},
		{name: "escaped key is the same key", body: `{"state":"s","st\u0061te":"t","question":"q",` + opts2 + `}`, class: decision.ErrInvalid, paths: []string{"state"}},
		{name: "case differs is unknown", body: `{"State":"s","question":"q",` + opts2 + `}`, class: decision.ErrInvalid, paths: []string{"State", "state"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ds, _, err := decision.ParseSemIf([]byte(tc.body), decision.Limits{})
			if tc.class == nil {
				require.NoError(t, err)
				require.Len(t, ds, 1)
				return
			}
			require.Nil(t, ds)
			requireClass(t, err, tc.class)
			if tc.paths != nil {
				require.ElementsMatch(t, tc.paths, paths(t, err), "error: %v", err)
			}
			if tc.class == decision.ErrMalformed {
				require.Contains(t, err.Error(), "malformed")
			}
		})
	}
}

func TestValidationErrorFormat(t *testing.T) {
	t.Parallel()
	_, _, err := decision.ParseSemIf(mustJSON(t, semif(setOpt(1, "id", "billing "), set("question", ""))), decision.Limits{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "options[1].id: must not start or end with whitespace")
	require.Contains(t, err.Error(), "question: must not be empty or whitespace")
	require.Equal(t, "options[1].id: m", decision.FieldError{Path: "options[1].id", Message: "m"}.Error())
	require.Equal(t, "m", decision.FieldError{Message: "m"}.Error())
	// The error marshals for HTTP bodies.
	b := mustJSON(t, fieldErrors(t, err)[0])
	require.Contains(t, string(b), `"path":`)
	require.Contains(t, string(b), `"message":`)
}

// TestStateLimitCountsDecodedBytes: the state limit is about the state,
// not about how the client escaped it. Python's json.dumps escapes every
// non-ASCII character as \uXXXX (six bytes for a two-byte é), Go's
// json.Marshal escapes & < >, and pretty-printed JSON carries whitespace.
func TestStateLimitCountsDecodedBytes(t *testing.T) {
	t.Parallel()
	const optsJSON = `"options":[{"id":"a","description":"A"},{"id":"b","description":"B"}]`
	tests := []struct {
		name  string
		state string // raw JSON
		lim   decision.Limits
	}{
		{"python-escaped text within the default limit", `"` + strings.Repeat(`\u00e9`, 60000) + `"`, decision.Limits{}},
		{"go-escaped text at a small limit", `"00000000000000\u002600000000"`, decision.Limits{MaxStateBytes: 24}},
		{"pretty-printed object", "{\n    \"a\" :   \"xxxxx\"\n}", decision.Limits{MaxStateBytes: 16}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ds, _, err := decision.ParseSemIf([]byte(`{"state":`+tc.state+`,"question":"q",`+optsJSON+`}`), tc.lim)
			require.NoError(t, err)
			limit := tc.lim.MaxStateBytes
			if limit == 0 {
				limit = decision.DefaultLimits().MaxStateBytes
			}
			require.LessOrEqual(t, ds[0].State.Len(), limit)
			require.NoError(t, ds[0].Validate(tc.lim, ""))
			_, err = decision.ParseSystemOne([]byte(`{"state":`+tc.state+`,"questions":{"k":{"type":"noul","instructions":"x"}}}`), tc.lim)
			require.NoError(t, err)
		})
	}
	// The decoded size still counts: one byte more is refused.
	_, _, err := decision.ParseSemIf([]byte(`{"state":"`+strings.Repeat(`\u00e9`, 128<<10)+`x","question":"q",`+optsJSON+`}`), decision.Limits{})
	requireClass(t, err, decision.ErrTooLarge)
}

func TestParseSemIfDebias(t *testing.T) {
	t.Parallel()
	base := `{"state":"s","question":"q?","options":[{"id":"a","description":""},{"id":"b","description":""}],"debias":%s}`
	ds, _, err := decision.ParseSemIf([]byte(fmt.Sprintf(base, "2")), decision.Limits{})
	require.NoError(t, err)
	require.Equal(t, 2, ds[0].Debias)
	for _, bad := range []string{`"x"`, "1.5", "-1", "256"} {
		_, _, err := decision.ParseSemIf([]byte(fmt.Sprintf(base, bad)), decision.Limits{})
		require.ErrorContains(t, err, "debias", bad)
	}
}
