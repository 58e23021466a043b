package decision_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

// answerFixture parses the request whose answers the golden files hold and
// returns its questions by key.
func answerFixture(t *testing.T) *decision.SystemOneRequest {
	t.Helper()
	req, err := decision.ParseSystemOne(s1(`"Refund request for order 1182; the customer sounds calm."`,
		q("route", `{"type":"choice","instructions":"Which team?","criteria":{"zebra":"Zoo team.","apple":null,"mango":"Fruit team."}}`),
		q("is_spam", `{"type":"noul","instructions":"Is this spam?"}`),
		q("quality", `{"type":"score","instructions":"How clear is it?","criteria":["Poor.","Fair.","Good.","Excellent."]}`),
	), decision.Limits{})
	require.NoError(t, err)
	return req
}

// fixtureResult is a scored result as the engine would return it.
func fixtureResult(ids []string, probs, logits []float64) decision.Result {
	best := 0
	for i, p := range probs {
		if p > probs[best] {
			best = i
		}
	}
	return decision.Result{
		OptionIDs: ids, Probabilities: probs, OptionLogits: logits, Chosen: ids[best],
		PromptSHA256: "9f2c", PromptVersion: "semif-v1", Temperature: 1,
		Readout: "last-position logits", Tokens: &decision.Tokens{Input: 57, StatePrefix: 30, Evaluated: 27},
	}
}

func fixtureResults(t *testing.T, req *decision.SystemOneRequest) []decision.Result {
	t.Helper()
	choice := fixtureResult([]string{"zebra", "apple", "mango"}, []float64{0.25, 0.625, 0.125}, []float64{1, 2, 0.5})
	choice.Outcome = &decision.Outcome{Status: decision.StatusDecided, Chosen: "apple", Step: "model", Reason: "p 0.625 above 0.5"}
	noul := fixtureResult([]string{"true", "false"}, []float64{1, 0}, []float64{2.5, -4})
	score := fixtureResult([]string{"0", "1", "2", "3"}, []float64{0, 0.25, 0.5, 0.25}, []float64{-9, 1, 1.5, 1})
	out := []decision.Result{choice, noul, score}
	ds := req.Decisions()
	for i, r := range out {
		require.Equal(t, []string{"route", "is_spam", "quality"}[i], req.Questions[i].Key)
		require.Equal(t, ds[i].OptionIDs(), r.OptionIDs)
	}
	return out
}

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return bytes.TrimSpace(b)
}

// requireFloats walks a decoded JSON value and checks that every number
// at the given keys is written as a float (with '.' or an exponent).
func requireFloats(t *testing.T, raw []byte, keys ...string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	require.NoError(t, dec.Decode(&v))
	for _, k := range keys {
		switch x := v[k].(type) {
		case json.Number:
			require.True(t, strings.ContainsAny(x.String(), ".eE"), "%s = %s is not a float literal", k, x)
		case map[string]any:
			for kk, vv := range x {
				n, ok := vv.(json.Number)
				require.True(t, ok, "%s.%s is %T", k, kk, vv)
				require.True(t, strings.ContainsAny(n.String(), ".eE"), "%s.%s = %s is not a float literal", k, kk, n)
			}
		default:
			t.Fatalf("%s has type %T", k, x)
		}
	}
}

func TestSystemOneAnswerGolden(t *testing.T) {
	t.Parallel()
	req := answerFixture(t)
	results := fixtureResults(t, req)
	files := []string{"answer_choice.json", "answer_noul.json", "answer_score.json"}
	floatKeys := [][]string{{"probabilities", "confidence"}, {"noul"}, {"score", "probabilities", "confidence"}}
	for i, qq := range req.Questions {
		got, err := decision.SystemOneAnswer(qq, &results[i])
		require.NoError(t, err)
		require.Equal(t, string(golden(t, files[i])), string(got), files[i])
		require.True(t, json.Valid(got))
		requireFloats(t, got, floatKeys[i]...)
	}
}

func TestSystemOneAnswerShapes(t *testing.T) {
	t.Parallel()
	req := answerFixture(t)
	results := fixtureResults(t, req)

	decode := func(b []byte) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	keysInOrder := func(raw json.RawMessage) []string {
		dec := json.NewDecoder(bytes.NewReader(raw))
		_, err := dec.Token()
		require.NoError(t, err)
		var keys []string
		for dec.More() {
			tok, err := dec.Token()
			require.NoError(t, err)
			keys = append(keys, tok.(string))
			var skip json.RawMessage
			require.NoError(t, dec.Decode(&skip))
		}
		return keys
	}

	choice, err := decision.SystemOneAnswer(req.Questions[0], &results[0])
	require.NoError(t, err)
	require.Equal(t, []string{"type", "choice", "probabilities", "confidence", "verdict"}, keysInOrder(choice))
	require.Equal(t, []string{"zebra", "apple", "mango"}, keysInOrder(decode(choice)["probabilities"]))

	noul, err := decision.SystemOneAnswer(req.Questions[1], &results[1])
	require.NoError(t, err)
	require.Equal(t, []string{"type", "noul", "verdict"}, keysInOrder(noul))
	require.NotContains(t, decode(noul), "confidence")

	score, err := decision.SystemOneAnswer(req.Questions[2], &results[2])
	require.NoError(t, err)
	require.Equal(t, []string{"type", "score", "legend", "probabilities", "confidence", "verdict"}, keysInOrder(score))
	require.Equal(t, []string{"0", "1", "2", "3"}, keysInOrder(decode(score)["legend"]))
	require.Equal(t, []string{"0", "1", "2", "3"}, keysInOrder(decode(score)["probabilities"]))

	// The official clients' view of the answers.
	var c struct {
		Type          string             `json:"type"`
		Choice        string             `json:"choice"`
		Probabilities map[string]float64 `json:"probabilities"`
		Confidence    float64            `json:"confidence"`
	}
	require.NoError(t, json.Unmarshal(choice, &c))
	require.Equal(t, "choice", c.Type)
	require.Equal(t, "apple", c.Choice)
	require.Equal(t, map[string]float64{"zebra": 0.25, "apple": 0.625, "mango": 0.125}, c.Probabilities)
	require.Equal(t, 0.4375, c.Confidence)
	var s struct {
		Score  float64           `json:"score"`
		Legend map[string]string `json:"legend"`
	}
	require.NoError(t, json.Unmarshal(score, &s))
	require.Equal(t, 2.0, s.Score)
	require.Equal(t, "Excellent.", s.Legend["3"])
}

func TestSystemOneAnswerValues(t *testing.T) {
	t.Parallel()
	req := answerFixture(t)
	noulQ, scoreQ, choiceQ := req.Questions[1], req.Questions[2], req.Questions[0]
	tests := []struct {
		name  string
		q     decision.SystemOneQuestion
		probs []float64
		want  string // substring of the answer
	}{
		{"noul zero", noulQ, []float64{0, 1}, `"noul":0.0,`},
		{"noul three quarters", noulQ, []float64{0.75, 0.25}, `"noul":0.75,`},
		{"noul tiny", noulQ, []float64{1e-7, 1 - 1e-7}, `"noul":1e-07,`},
		{"score one-hot top", scoreQ, []float64{0, 0, 0, 1}, `"score":3.0,`},
		{"score one-hot top confidence", scoreQ, []float64{0, 0, 0, 1}, `"confidence":1.0,`},
		{"score between levels", scoreQ, []float64{0.5, 0.5, 0, 0}, `"score":0.5,`},
		{"score bottom", scoreQ, []float64{1, 0, 0, 0}, `"score":0.0,`},
		{"score uniform confidence", scoreQ, []float64{0.25, 0.25, 0.25, 0.25}, `"confidence":0.0,`},
		{"choice one-hot", choiceQ, []float64{0, 0, 1}, `"probabilities":{"zebra":0.0,"apple":0.0,"mango":1.0},"confidence":1.0,`},
		{"choice half", choiceQ, []float64{0.5, 0.25, 0.25}, `"confidence":0.25,`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids := make([]string, len(tc.q.Options))
			for i, o := range tc.q.Options {
				ids[i] = o.ID
			}
			res := fixtureResult(ids, tc.probs, make([]float64, len(ids)))
			got, err := decision.SystemOneAnswer(tc.q, &res)
			require.NoError(t, err)
			require.Contains(t, string(got), tc.want)
			require.True(t, json.Valid(got), string(got))
		})
	}
}

func TestSystemOneResponseGolden(t *testing.T) {
	t.Parallel()
	req := answerFixture(t)
	results := fixtureResults(t, req)
	answers := make([][]byte, len(req.Questions))
	usage := decision.SystemOneUsage{}
	for i, qq := range req.Questions {
		a, err := decision.SystemOneAnswer(qq, &results[i])
		require.NoError(t, err)
		answers[i] = a
		usage.InputTokens += results[i].Tokens.Input
	}
	got := decision.SystemOneResponse("verdict-tiny-q8", req.Questions, answers, usage)
	require.Equal(t, string(golden(t, "response.json")), string(got))

	// It is valid JSON with the answers in question order and integer usage.
	var resp struct {
		Model   string                     `json:"model"`
		Answers map[string]json.RawMessage `json:"answers"`
		Usage   struct {
			InputTokens  *int `json:"input_tokens"`
			OutputTokens *int `json:"output_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(got, &resp))
	require.Equal(t, "verdict-tiny-q8", resp.Model)
	require.Len(t, resp.Answers, 3)
	require.Equal(t, 171, *resp.Usage.InputTokens)
	require.Equal(t, 0, *resp.Usage.OutputTokens)
	require.Less(t, bytes.Index(got, []byte(`"route":`)), bytes.Index(got, []byte(`"is_spam":`)))
	require.Less(t, bytes.Index(got, []byte(`"is_spam":`)), bytes.Index(got, []byte(`"quality":`)))
	require.Contains(t, string(got), `"usage":{"input_tokens":171,"output_tokens":0}`)
}

func TestSystemOneResponseEscapes(t *testing.T) {
	t.Parallel()
	qs := []decision.SystemOneQuestion{{Key: `he said "hi" <b>`}}
	got := decision.SystemOneResponse(`m"1`, qs, [][]byte{[]byte(`{"type":"noul","noul":0.5}`)}, decision.SystemOneUsage{})
	var m map[string]any
	require.NoError(t, json.Unmarshal(got, &m), string(got))
	require.Equal(t, `m"1`, m["model"])
	require.Contains(t, m["answers"], `he said "hi" <b>`)
}

func TestConfidence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		probs []float64
		want  float64
	}{
		{[]float64{1, 0}, 1},
		{[]float64{0.5, 0.5}, 0},
		{[]float64{0.9, 0.1}, 0.8},
		{[]float64{0.25, 0.625, 0.125}, 0.4375},
		{[]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, 0},
		{[]float64{0.2, 0.2}, 0},   // below uniform: clamped at 0
		{[]float64{1.5, 0}, 1},     // above one: clamped at 1
		{[]float64{0, 0, 0, 1}, 1}, // one option has all the mass
		{[]float64{0.7, 0.1, 0.1, 0.1}, 0.6},
	}
	for _, tc := range tests {
		require.InDelta(t, tc.want, decision.Confidence(tc.probs), 1e-12, "%v", tc.probs)
		c := decision.Confidence(tc.probs)
		require.GreaterOrEqual(t, c, 0.0)
		require.LessOrEqual(t, c, 1.0)
	}
	require.Equal(t, 1.0, decision.Confidence([]float64{1}))
	require.Equal(t, 1.0, decision.Confidence(nil))
}

func TestFormatFloat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want string
	}{
		{1, "1.0"},
		{0, "0.0"},
		{2, "2.0"},
		{-3, "-3.0"},
		{0.5, "0.5"},
		{0.3333333333333333, "0.3333333333333333"},
		{1e-7, "1e-07"},
		{1e21, "1e+21"},
		{123456789, "1.23456789e+08"},
		{math.NaN(), "0.0"},
		{math.Inf(1), "0.0"},
		{math.Inf(-1), "0.0"},
	}
	for _, tc := range tests {
		got := decision.FormatFloat(tc.in)
		require.Equal(t, tc.want, got, "FormatFloat(%v)", tc.in)
		require.True(t, strings.ContainsAny(got, ".eE"))
		var back float64
		require.NoError(t, json.Unmarshal([]byte(got), &back))
		if !math.IsNaN(tc.in) && !math.IsInf(tc.in, 0) {
			require.Equal(t, tc.in, back)
		}
	}
}
