package policy_test

import (
	"os"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/policy"
)

func loadExample(b *testing.B) *policy.Policy {
	b.Helper()
	p, err := policy.Load("../examples/policy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	return p
}

var benchOptions = []string{"billing", "technical", "account", "abuse", "other"}

// BenchmarkBefore runs kind resolution, authorization and the three rules of
// the example policy, none of which match, over a 4 KiB text state.
func BenchmarkBefore(b *testing.B) {
	p := loadExample(b)
	d := newDecision("ticket-1", strings.Repeat("the app crashes when I open it. ", 128), benchOptions...)
	c := policy.Caller{Tenant: "acme"}
	b.ReportAllocs()
	for b.Loop() {
		if plan := p.Before(d, c); plan.Outcome != nil {
			b.Fatal(plan.Outcome.Reason)
		}
	}
}

// BenchmarkBeforeJSON is BenchmarkBefore with a JSON state the rules parse.
func BenchmarkBeforeJSON(b *testing.B) {
	p := loadExample(b)
	d := newDecision("ticket-1", `{"plan":"pro","body":"`+strings.Repeat("the app crashes when I open it. ", 128)+`","tags":["a","b"]}`, benchOptions...)
	b.ReportAllocs()
	for b.Loop() {
		if plan := p.Before(d, policy.Caller{}); plan.Outcome != nil {
			b.Fatal(plan.Outcome.Reason)
		}
	}
}

// BenchmarkAfter applies temperature and thresholds to a scored result.
func BenchmarkAfter(b *testing.B) {
	p := loadExample(b)
	plan := p.Before(newDecision("ticket-1", "x", benchOptions...), policy.Caller{})
	r := decision.Result{OptionIDs: benchOptions, OptionLogits: []float64{3, 1, 0.5, -1, 0}}
	b.ReportAllocs()
	for b.Loop() {
		if out := p.After(plan, r, nil); out.Outcome == nil {
			b.Fatal("no outcome")
		}
	}
}

// BenchmarkParse loads the example policy (CEL compilation included).
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("../examples/policy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
