package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

func TestSoftmaxIsStableAndTempered(t *testing.T) {
	t.Parallel()
	p := engine.Softmax([]float64{1000, 1000, 999}, 1)
	require.InDelta(t, 1.0, p[0]+p[1]+p[2], 1e-12)
	require.InDelta(t, p[0], p[1], 1e-15)
	require.InDelta(t, math.Exp(-1), p[2]/p[0], 1e-12)
	hot := engine.Softmax([]float64{2, 0}, 2)
	require.InDelta(t, 1/(1+math.Exp(-1)), hot[0], 1e-12)
	require.Equal(t, engine.Softmax([]float64{2, 0}, 1), engine.Softmax([]float64{2, 0}, 0)) // T <= 0 means 1
}

func TestReadout(t *testing.T) {
	t.Parallel()
	d := decision.Decision{ID: "x", Kind: "k", Options: []decision.Option{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	var r decision.Result
	engine.Readout(&r, &d, []float64{1, 3, 3}, 1)
	require.Equal(t, "b", r.Chosen, "the first of equal maxima")
	require.Equal(t, []string{"a", "b", "c"}, r.OptionIDs)
	require.Equal(t, "x", r.ID)
	require.Equal(t, "k", r.Kind)
	require.InDelta(t, 0, r.Margin, 1e-12)
	require.InDelta(t, decision.Confidence(r.Probabilities), r.Confidence, 1e-12)
	engine.Readout(&r, &d, []float64{0, 0, 5}, 1)
	require.Equal(t, "c", r.Chosen)
	require.InDelta(t, r.Probabilities[2]-r.Probabilities[0], r.Margin, 1e-12)
}

func TestLabels(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"A", "B", "C"}, engine.Labels(3))
	require.Equal(t, "Z", engine.Labels(26)[25])
	l := engine.Labels(27)
	require.Equal(t, "1", l[0])
	require.Equal(t, "27", l[26])
	require.Len(t, engine.Labels(255), 255)
}

func TestDetectChat(t *testing.T) {
	t.Parallel()
	require.Equal(t, engine.ChatChatML, engine.DetectChat("{{'<|im_start|>' + message['role']}}"))
	require.Equal(t, engine.ChatLlama3, engine.DetectChat("<|start_header_id|>user<|end_header_id|>"))
	require.Equal(t, engine.ChatGemma, engine.DetectChat("<start_of_turn>user"))
	require.Equal(t, engine.ChatPlain, engine.DetectChat(""))
	require.Equal(t, engine.ChatPlain, engine.DetectChat("[INST] something else"))
	require.Len(t, engine.ChatSpecials(engine.ChatLlama3), 3)
	require.Nil(t, engine.ChatSpecials(engine.ChatPlain))
}

func sample() decision.Decision {
	return decision.Decision{
		ID: "r", State: decision.TextState("Password reset email never arrived."),
		Question: "Which queue?",
		Options:  []decision.Option{{ID: "access", Description: "Account access."}, {ID: "billing", Description: "billing"}, {ID: "x", Description: ""}},
	}
}

func TestRenderOrderAndPrefix(t *testing.T) {
	t.Parallel()
	for _, fam := range []engine.ChatFamily{engine.ChatPlain, engine.ChatChatML, engine.ChatLlama3, engine.ChatGemma} {
		d := sample()
		p := engine.Render(&d, fam)
		text := p.Text()
		require.Equal(t, "verdict-v1/"+string(fam), p.Version)
		iState := strings.Index(text, "Password reset email")
		iQ := strings.Index(text, "Question: Which queue?")
		iA := strings.Index(text, "A. access: Account access.")
		require.True(t, iState >= 0 && iState < iQ && iQ < iA, "%s: state, then question, then options", fam)
		// The state prefix ends after the state and before the question.
		require.Greater(t, p.StateEnd, iState)
		require.LessOrEqual(t, p.StateEnd, iQ)
		require.Contains(t, text, "B. billing\n", "a description equal to the id is not repeated")
		require.Contains(t, text, "C. x\n", "an empty description shows the id alone")
		require.Len(t, p.SHA256(), 64)
		for _, s := range p.Segments {
			if s.Special {
				require.Contains(t, engine.ChatSpecials(fam), s.Text)
			}
		}
		if fam == engine.ChatPlain {
			require.True(t, strings.HasSuffix(text, "\nAnswer:"))
			require.False(t, p.BareLabel)
		} else {
			require.True(t, p.BareLabel)
		}
	}
	// Two questions about one state share the text up to StateEnd.
	a, b := sample(), sample()
	b.Question = "Something else entirely?"
	pa, pb := engine.Render(&a, engine.ChatChatML), engine.Render(&b, engine.ChatChatML)
	require.Equal(t, pa.Text()[:pa.StateEnd], pb.Text()[:pb.StateEnd])
	require.NotEqual(t, pa.SHA256(), pb.SHA256())
}

func TestRenderJSONStateCanonically(t *testing.T) {
	t.Parallel()
	var a, b decision.State
	require.NoError(t, json.Unmarshal([]byte(`{"b":1,"a":{"y":2,"x":[1,2]}}`), &a))
	require.NoError(t, json.Unmarshal([]byte(`{ "a": {"x":[1, 2], "y":2}, "b": 1 }`), &b))
	da, db := sample(), sample()
	da.State, db.State = a, b
	pa, pb := engine.Render(&da, engine.ChatPlain), engine.Render(&db, engine.ChatPlain)
	require.Equal(t, pa.Text(), pb.Text())
	require.Contains(t, pa.Text(), "\"a\": {\n")
}

func TestErrorResultAndRetryable(t *testing.T) {
	t.Parallel()
	d := sample()
	cases := []struct {
		err       error
		code      string
		retryable bool
	}{
		{engine.ErrBusy, "busy", true},
		{fmt.Errorf("wrapped: %w", engine.ErrUnavailable), "unavailable", true},
		{engine.ErrUnsupported, "unsupported", false},
		{engine.ErrContextFull, "too_large", false},
		{fmt.Errorf("decode: %w: %w", engine.ErrContextFull, errors.New("no KV slot")), "too_large", false},
		{engine.ErrClosed, "closed", false},
		{context.Canceled, "canceled", false},
		{context.DeadlineExceeded, "timeout", true},
		{fmt.Errorf("score: %w", context.DeadlineExceeded), "timeout", true},
		{errors.New("boom"), "engine", false},
	}
	for _, c := range cases {
		r := engine.ErrorResult(&d, c.err)
		require.EqualValues(t, c.code, r.Error.Code, c.err.Error())
		require.Equal(t, c.retryable, r.Error.Retryable, c.err.Error())
		require.Equal(t, c.retryable, engine.Retryable(c.err))
		require.Equal(t, "r", r.ID)
		require.Equal(t, d.OptionIDs(), r.OptionIDs)
	}
}
