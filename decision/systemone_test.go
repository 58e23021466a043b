package decision_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

// s1 builds a System One body from a state and raw question JSON, keeping
// the questions in the given order (a Go map would sort them).
func s1(state string, questions ...string) []byte {
	return []byte(`{"model":"jev-latest","state":` + state + `,"questions":{` + strings.Join(questions, ",") + `}}`)
}

// q renders one question entry.
func q(key, body string) string { return strconv.Quote(key) + ":" + body }

func TestParseSystemOneNoul(t *testing.T) {
	t.Parallel()
	req, err := decision.ParseSystemOne(s1(`"An email offering cheap watches."`,
		q("spam", `{"type":"noul","instructions":"Is this spam?"}`),
		q("urgent", `{"type":"noul","instructions":"Is it urgent?","criteria":{"true":"Needs an answer today.","false":"Can wait."}}`),
		q("partial", `{"type":"noul","instructions":"Is it urgent?","criteria":{"false":"Can wait.","true":null}}`),
		q("nullcrit", `{"type":"noul","instructions":"Is it urgent?","criteria":null}`),
	), decision.Limits{})
	require.NoError(t, err)
	require.Equal(t, "jev-latest", req.Model)
	require.Equal(t, decision.TextState("An email offering cheap watches."), req.State)
	require.Len(t, req.Questions, 4)
	require.Equal(t, decision.SystemOneQuestion{
		Key: "spam", Type: decision.TypeNoul, Instructions: "Is this spam?",
		Options: []decision.Option{{ID: "true", Description: "Yes."}, {ID: "false", Description: "No."}},
	}, req.Questions[0])
	require.Equal(t, []decision.Option{{ID: "true", Description: "Needs an answer today."}, {ID: "false", Description: "Can wait."}}, req.Questions[1].Options)
	require.Equal(t, []decision.Option{{ID: "true", Description: "Yes."}, {ID: "false", Description: "Can wait."}}, req.Questions[2].Options)
	require.Equal(t, []string{"true", "false"}, []string{req.Questions[3].Options[0].ID, req.Questions[3].Options[1].ID})
}

func TestParseSystemOneChoiceKeepsCriteriaOrder(t *testing.T) {
	t.Parallel()
	// Sorted order (apple, mango, zebra) differs from insertion order.
	req, err := decision.ParseSystemOne(s1(`{"ticket": {"subject": "refund", "body": "..."}}`,
		q("route", `{"type":"choice","instructions":"Which team?","criteria":{"zebra":"Zoo team.","apple":null,"mango":"Fruit team.","Banana":""}}`),
	), decision.Limits{})
	require.NoError(t, err)
	require.True(t, req.State.IsJSON())
	require.Equal(t, `{"ticket":{"body":"...","subject":"refund"}}`, string(req.State.JSON))
	require.Equal(t, []decision.Option{
		{ID: "zebra", Description: "Zoo team."},
		{ID: "apple", Description: ""},
		{ID: "mango", Description: "Fruit team."},
		{ID: "Banana", Description: ""},
	}, req.Questions[0].Options)

	ds := req.Decisions()
	require.Len(t, ds, 1)
	require.Equal(t, []string{"zebra", "apple", "mango", "Banana"}, ds[0].OptionIDs())
	require.NoError(t, ds[0].Validate(decision.Limits{}, ""))
}

func TestParseSystemOneScore(t *testing.T) {
	t.Parallel()
	req, err := decision.ParseSystemOne(s1(`"A short essay."`,
		q("quality", `{"type":"score","instructions":"How well written is it?","criteria":["Poor.","Fair.","Good.","Excellent."]}`),
	), decision.Limits{})
	require.NoError(t, err)
	require.Equal(t, []decision.Option{
		{ID: "0", Description: "Poor."}, {ID: "1", Description: "Fair."},
		{ID: "2", Description: "Good."}, {ID: "3", Description: "Excellent."},
	}, req.Questions[0].Options)
}

// The TypeSafe SDK's helpers send "instructions": null (noul() with no
// argument, choice(null, …), score(null, …)), may leave instructions out,
// and document null score levels; all are valid requests.
func TestParseSystemOneNullsAsTheSDKSendsThem(t *testing.T) {
	t.Parallel()
	req, err := decision.ParseSystemOne(s1(`"A ticket."`,
		q("a", `{"type":"noul","instructions":null}`),
		q("b", `{"type":"noul"}`),
		q("c", `{"type":"choice","instructions":null,"criteria":{"x":null,"y":null}}`),
		q("d", `{"type":"score","instructions":null,"criteria":["bad",null,"good"]}`),
	), decision.Limits{})
	require.NoError(t, err)
	require.Len(t, req.Questions, 4)
	for i, d := range req.Decisions() {
		require.NotEmpty(t, d.Question, "question %d", i)
		require.NoError(t, d.Validate(decision.Limits{}, ""))
	}
	require.Equal(t, decision.DefaultInstructions(decision.TypeNoul), req.Questions[0].Instructions)
	require.Equal(t, []bool{false, true, false}, req.Questions[3].NullLevels)
	r := &decision.Result{OptionIDs: []string{"0", "1", "2"}, Probabilities: []float64{0.25, 0.5, 0.25}}
	a, err := decision.SystemOneAnswer(req.Questions[3], r)
	require.NoError(t, err)
	require.Contains(t, string(a), `"legend":{"0":"bad","1":null,"2":"good"}`)
}

// Capacity errors carry the hosted service's phrase and the field path.
func TestParseSystemOneCapacityWording(t *testing.T) {
	t.Parallel()
	members := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"c%d":null`, i)
		}
		return strings.Join(parts, ",")
	}
	levels := func(n int) string { return strings.TrimSuffix(strings.Repeat(`"l",`, n), ",") }
	for _, c := range []struct{ question, phrase string }{
		{`{"type":"choice","criteria":{` + members(1) + `}}`, decision.PhraseTooFewOptions},
		{`{"type":"choice","criteria":{` + members(256) + `}}`, decision.PhraseOptionsPerChoice},
		{`{"type":"score","criteria":[` + levels(1) + `]}`, decision.PhraseScoreLevels},
		{`{"type":"score","criteria":[` + levels(11) + `]}`, decision.PhraseScoreLevels},
	} {
		_, err := decision.ParseSystemOne(s1(`"s"`, q("k", c.question)), decision.Limits{})
		require.ErrorContains(t, err, c.phrase)
		require.ErrorContains(t, err, "questions.k.criteria")
	}
}

func TestParseSystemOneLevelsAndOptionCounts(t *testing.T) {
	t.Parallel()
	choice := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"c%d":"Choice %d."`, i, i)
		}
		return `{"type":"choice","instructions":"Pick.","criteria":{` + strings.Join(parts, ",") + `}}`
	}
	score := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"Level %d."`, i)
		}
		return `{"type":"score","instructions":"Rate.","criteria":[` + strings.Join(parts, ",") + `]}`
	}
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"choice 1 option", choice(1), false},
		{"choice 2 options", choice(2), true},
		{"choice 255 options", choice(255), true},
		{"choice 256 options", choice(256), false},
		{"choice empty criteria", choice(0), false},
		{"score 1 level", score(1), false},
		{"score 2 levels", score(2), true},
		{"score 10 levels", score(10), true},
		{"score 11 levels", score(11), false},
		{"score empty criteria", score(0), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := decision.ParseSystemOne(s1(`"s"`, q("k", tc.body)), decision.Limits{})
			if tc.ok {
				require.NoError(t, err)
				ds := req.Decisions()
				require.NoError(t, ds[0].Validate(decision.Limits{}, ""))
				if strings.Contains(tc.body, `"score"`) {
					for i, o := range ds[0].Options {
						require.Equal(t, strconv.Itoa(i), o.ID)
					}
				}
				return
			}
			requireClass(t, err, decision.ErrInvalid)
			require.Equal(t, []string{"questions.k.criteria"}, paths(t, err))
		})
	}
}

func TestParseSystemOneFieldErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  []byte
		paths []string // nil: valid
		class error
		msg   string
	}{
		{name: "unknown type", body: s1(`"s"`, q("k", `{"type":"rank","instructions":"x"}`)), paths: []string{"questions.k.type"}, class: decision.ErrInvalid, msg: `"rank"`},
		{name: "missing type", body: s1(`"s"`, q("k", `{"instructions":"x"}`)), paths: []string{"questions.k.type"}, class: decision.ErrInvalid, msg: "required"},
		{name: "type not string", body: s1(`"s"`, q("k", `{"type":1,"instructions":"x"}`)), paths: []string{"questions.k.type"}, class: decision.ErrInvalid},
		{name: "empty instructions", body: s1(`"s"`, q("k", `{"type":"noul","instructions":""}`)), paths: []string{"questions.k.instructions"}, class: decision.ErrInvalid},
		{name: "whitespace instructions", body: s1(`"s"`, q("k", `{"type":"noul","instructions":" \n"}`)), paths: []string{"questions.k.instructions"}, class: decision.ErrInvalid},
		{name: "number instructions", body: s1(`"s"`, q("k", `{"type":"noul","instructions":3}`)), paths: []string{"questions.k.instructions"}, class: decision.ErrInvalid, msg: "number"},
		{name: "empty object instructions", body: s1(`"s"`, q("k", `{"type":"noul","instructions":{}}`)), paths: []string{"questions.k.instructions"}, class: decision.ErrInvalid},
		{name: "empty array instructions", body: s1(`"s"`, q("k", `{"type":"noul","instructions":[]}`)), paths: []string{"questions.k.instructions"}, class: decision.ErrInvalid},
		{name: "instructions too large", body: s1(`"s"`, q("k", `{"type":"noul","instructions":"`+strings.Repeat("x", 16<<10+1)+`"}`)), paths: []string{"questions.k.instructions"}, class: decision.ErrTooLarge},
		{name: "question not object", body: s1(`"s"`, q("k", `"Is it spam?"`)), paths: []string{"questions.k"}, class: decision.ErrInvalid},
		{name: "question key empty", body: s1(`"s"`, q("", `{"type":"noul","instructions":"x"}`)), paths: []string{"questions."}, class: decision.ErrInvalid},
		{name: "question key padded", body: s1(`"s"`, q(" k", `{"type":"noul","instructions":"x"}`)), paths: []string{"questions. k"}, class: decision.ErrInvalid},
		{name: "duplicate question key", body: s1(`"s"`, q("k", `{"type":"noul","instructions":"x"}`), q("k", `{"type":"noul","instructions":"y"}`)), paths: []string{"questions.k"}, class: decision.ErrInvalid, msg: "duplicate"},
		{name: "noul unknown criterion", body: s1(`"s"`, q("k", `{"type":"noul","instructions":"x","criteria":{"true":"a","maybe":"b"}}`)), paths: []string{"questions.k.criteria.maybe"}, class: decision.ErrInvalid},
		{name: "noul criteria array", body: s1(`"s"`, q("k", `{"type":"noul","instructions":"x","criteria":["a","b"]}`)), paths: []string{"questions.k.criteria"}, class: decision.ErrInvalid},
		{name: "noul criterion number", body: s1(`"s"`, q("k", `{"type":"noul","instructions":"x","criteria":{"true":1}}`)), paths: []string{"questions.k.criteria.true"}, class: decision.ErrInvalid},
		{name: "choice missing criteria", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x"}`)), paths: []string{"questions.k.criteria"}, class: decision.ErrInvalid, msg: "required"},
		{name: "choice null criteria", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":null}`)), paths: []string{"questions.k.criteria"}, class: decision.ErrInvalid},
		{name: "choice criteria array", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":["a","b"]}`)), paths: []string{"questions.k.criteria"}, class: decision.ErrInvalid},
		{name: "choice id padded", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":{"a":"A","b ":"B"}}`)), paths: []string{"questions.k.criteria.b "}, class: decision.ErrInvalid},
		{name: "choice id control", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":{"a":"A","b\u0007":"B"}}`)), paths: []string{"questions.k.criteria.b\a"}, class: decision.ErrInvalid},
		{name: "choice duplicate id", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":{"a":"A","b":"B","a":"C"}}`)), paths: []string{"questions.k.criteria.a"}, class: decision.ErrInvalid, msg: "duplicate"},
		{name: "choice criterion number", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":{"a":"A","b":2}}`)), paths: []string{"questions.k.criteria.b"}, class: decision.ErrInvalid},
		{name: "choice criterion object", body: s1(`"s"`, q("k", `{"type":"choice","instructions":"x","criteria":{"a":"A","b":{"z":1,"y":2}}}`))},
		{name: "score criteria object", body: s1(`"s"`, q("k", `{"type":"score","instructions":"x","criteria":{"0":"a","1":"b"}}`)), paths: []string{"questions.k.criteria"}, class: decision.ErrInvalid},
		{name: "score missing criteria", body: s1(`"s"`, q("k", `{"type":"score","instructions":"x"}`)), paths: []string{"questions.k.criteria"}, class: decision.ErrInvalid},
		{name: "score empty level", body: s1(`"s"`, q("k", `{"type":"score","instructions":"x","criteria":["a"," ","c"]}`)), paths: []string{"questions.k.criteria[1]"}, class: decision.ErrInvalid},
		{name: "score empty string level", body: s1(`"s"`, q("k", `{"type":"score","instructions":"x","criteria":["a",""]}`)), paths: []string{"questions.k.criteria[1]"}, class: decision.ErrInvalid, msg: "null"},
		{name: "missing state", body: []byte(`{"questions":{"k":{"type":"noul","instructions":"x"}}}`), paths: []string{"state"}, class: decision.ErrInvalid, msg: "required"},
		{name: "empty state", body: s1(`""`, q("k", `{"type":"noul","instructions":"x"}`)), paths: []string{"state"}, class: decision.ErrInvalid},
		{name: "empty object state", body: s1(`{}`, q("k", `{"type":"noul","instructions":"x"}`)), paths: []string{"state"}, class: decision.ErrInvalid},
		{name: "number state", body: s1(`12`, q("k", `{"type":"noul","instructions":"x"}`)), paths: []string{"state"}, class: decision.ErrInvalid},
		{name: "state too large", body: s1(strconv.Quote(strings.Repeat("x", 256<<10+1)), q("k", `{"type":"noul","instructions":"x"}`)), paths: []string{"state"}, class: decision.ErrTooLarge},
		{name: "missing questions", body: []byte(`{"state":"s"}`), paths: []string{"questions"}, class: decision.ErrInvalid, msg: "required"},
		{name: "empty questions", body: s1(`"s"`), paths: []string{"questions"}, class: decision.ErrInvalid},
		{name: "questions array", body: []byte(`{"state":"s","questions":[{"type":"noul","instructions":"x"}]}`), paths: []string{"questions"}, class: decision.ErrInvalid},
		{name: "model number", body: []byte(`{"model":7,"state":"s","questions":{"k":{"type":"noul","instructions":"x"}}}`), paths: []string{"model"}, class: decision.ErrInvalid},
		{name: "model null", body: []byte(`{"model":null,"state":"s","questions":{"k":{"type":"noul","instructions":"x"}}}`)},
		{name: "model missing", body: []byte(`{"state":"s","questions":{"k":{"type":"noul","instructions":"x"}}}`)},
		{name: "unknown fields ignored", body: []byte(`{"model":"jev-1.13.0","temperature":0,"stream":false,"metadata":{"a":[1]},"state":"s","questions":{"k":{"type":"noul","instructions":"x","weight":3,"examples":[]}}}`)},
		{name: "top-level array", body: []byte(`[]`), paths: []string{""}, class: decision.ErrInvalid},
		{name: "malformed", body: []byte(`{"state":"s","questions":{`), class: decision.ErrMalformed},
		{name: "trailing garbage", body: append(s1(`"s"`, q("k", `{"type":"noul","instructions":"x"}`)), '!'), class: decision.ErrMalformed},
		{name: "empty body", body: nil, class: decision.ErrMalformed},
		{
			name: "problems of several questions together",
			body: s1(`"s"`,
				q("a", `{"type":"rank","instructions":"x"}`),
				q("b", `{"type":"noul","instructions":"fine"}`),
				q("c", `{"type":"choice","instructions":"","criteria":{"x":"X"}}`)),
			paths: []string{"questions.a.type", "questions.c.instructions", "questions.c.criteria"},
			class: decision.ErrInvalid,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := decision.ParseSystemOne(tc.body, decision.Limits{})
			if tc.class == nil {
				require.NoError(t, err)
				for _, d := range req.Decisions() {
					require.NoError(t, d.Validate(decision.Limits{}, ""))
				}
				return
			}
			require.Nil(t, req)
			requireClass(t, err, tc.class)
			if tc.paths != nil {
				require.ElementsMatch(t, tc.paths, uniq(paths(t, err)), "error: %v", err)
			}
			if tc.msg != "" {
				require.Contains(t, messageAt(t, err, tc.paths[0]), tc.msg)
			}
		})
	}
}

// uniq drops repeated paths (a field may have more than one problem).
func uniq(ps []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func TestParseSystemOneInstructionsObjectAndArray(t *testing.T) {
	t.Parallel()
	req, err := decision.ParseSystemOne(s1(`"s"`,
		q("o", `{"type":"noul","instructions":{"task":"Is it spam?","context":{"b":2,"a":1}}}`),
		q("a", `{"type":"noul","instructions":["Is it spam?", {"y":1,"x":0.10}]}`),
	), decision.Limits{})
	require.NoError(t, err)
	require.Equal(t, `{"context":{"a":1,"b":2},"task":"Is it spam?"}`, req.Questions[0].Instructions)
	require.Equal(t, `["Is it spam?",{"x":0.10,"y":1}]`, req.Questions[1].Instructions)
}

func TestParseSystemOneQuestionCount(t *testing.T) {
	t.Parallel()
	body := func(n int) []byte {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = q(fmt.Sprintf("q%d", i), `{"type":"noul","instructions":"Is it spam?"}`)
		}
		return s1(`"s"`, qs...)
	}
	req, err := decision.ParseSystemOne(body(64), decision.Limits{})
	require.NoError(t, err)
	require.Len(t, req.Questions, 64)

	_, err = decision.ParseSystemOne(body(65), decision.Limits{})
	requireClass(t, err, decision.ErrInvalid) // 422, as the hosted service answers
	require.Equal(t, []string{"questions"}, paths(t, err))

	_, err = decision.ParseSystemOne(body(3), decision.Limits{MaxDecisions: 2})
	requireClass(t, err, decision.ErrInvalid)
}

func TestSystemOneDecisions(t *testing.T) {
	t.Parallel()
	req, err := decision.ParseSystemOne(s1(`["a", {"b": 1}]`,
		q("zeta", `{"type":"noul","instructions":"Spam?"}`),
		q("alpha", `{"type":"score","instructions":"Rate.","criteria":["Bad.","Good."]}`),
		q("mid", `{"type":"choice","instructions":"Pick.","criteria":{"y":"Y.","x":"X."}}`),
	), decision.Limits{})
	require.NoError(t, err)
	ds := req.Decisions()
	require.Len(t, ds, 3)
	want := []struct {
		id, question string
		options      []string
	}{
		{"zeta", "Spam?", []string{"true", "false"}},
		{"alpha", "Rate.", []string{"0", "1"}},
		{"mid", "Pick.", []string{"y", "x"}},
	}
	for i, w := range want {
		require.Equal(t, w.id, ds[i].ID)
		require.Equal(t, w.question, ds[i].Question)
		require.Equal(t, w.options, ds[i].OptionIDs())
		require.Equal(t, req.State, ds[i].State)
		require.Equal(t, `["a",{"b":1}]`, string(ds[i].State.JSON))
		require.NoError(t, ds[i].Validate(decision.Limits{}, ""))
	}
}

// TestParseSystemOneLimitsMatchValidate: every decision ParseSystemOne
// accepts must pass Decision.Validate under the same limits (the worker
// validates again before scoring).
func TestParseSystemOneLimitsMatchValidate(t *testing.T) {
	t.Parallel()
	t.Run("JSON state measured canonically", func(t *testing.T) {
		t.Parallel()
		// {"a":"12345"} is 13 bytes: over a limit of 11 or 12, but within
		// the raw-size pre-check (limit + 2).
		for _, limit := range []int{11, 12} {
			lim := decision.Limits{MaxStateBytes: limit}
			_, err := decision.ParseSystemOne(s1(`{"a":"12345"}`, q("k", `{"type":"noul","instructions":"x"}`)), lim)
			requireClass(t, err, decision.ErrTooLarge)
			require.Equal(t, []string{"state"}, paths(t, err))
		}
	})
	t.Run("criterion description size", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("d", 4<<10+1)
		for _, body := range []string{
			`{"type":"choice","instructions":"x","criteria":{"a":"` + long + `","b":"B"}}`,
			`{"type":"noul","instructions":"x","criteria":{"true":"` + long + `"}}`,
			`{"type":"score","instructions":"x","criteria":["a","` + long + `"]}`,
		} {
			_, err := decision.ParseSystemOne(s1(`"s"`, q("k", body)), decision.Limits{})
			requireClass(t, err, decision.ErrTooLarge)
		}
	})
}

func TestLooksLikeSystemOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want bool
	}{
		{`{"state":"s","questions":{"k":{"type":"noul","instructions":"x"}}}`, true},
		{`{"questions":{}}`, true},
		{`{"state":"s","question":"q","options":[]}`, false},
		{`{"decision":{"questions":{}}}`, false},
		{`{"questions":[]}`, false},
		{`{"questions":null}`, false},
		{`{"questions":`, false},
		{`[]`, false},
		{``, false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, decision.LooksLikeSystemOne([]byte(tc.body)), tc.body)
	}
}
