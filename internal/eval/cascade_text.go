package eval

import (
	"fmt"
	"io"
)

// WriteText writes the cascade report as aligned plain text: each model
// alone, the cascade at each threshold of both rules (a * marks those
// within tolerance of the big model's accuracy) and the recommendations.
func (r *CascadeReport) WriteText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("cascade             small %s, big %s\n", orDash(r.SmallModel), orDash(r.BigModel))
	p("labeled decisions   %d (valid: small %d, big %d; skipped, gold unknown: %d; without gold: %d)\n", r.Labeled, r.SmallValid, r.BigValid, r.Skipped, r.Unmatched)
	p("tolerance           %.4f (* marks accuracy ≥ %.4f: the big model's alone minus the tolerance)\n", r.Tolerance, r.Big.Accuracy-r.Tolerance)
	const head = "  %-11s %9s %7s %8s %7s %7s %12s %10s %7s\n"
	p("\n"+head, "answered by", "escalated", "rate", "accuracy", "ECE", "Brier", "decode s/dec", "tokens/dec", "vs big")
	for _, a := range []struct {
		name string
		pt   *CascadePoint
	}{{"small alone", &r.Small}, {"big alone", &r.Big}} {
		p("  %-11s %9s %7s %s%s\n", a.name, "-", "-", metricCols(a.pt), marks(a.pt, nil))
	}
	for _, t := range []struct {
		title, col string
		points     []CascadePoint
		rec        *CascadePoint
	}{{"escalate when p_max < t", "t", r.Top, r.Recommended}, {"escalate when margin < m", "m", r.Margin, r.RecommendedMargin}} {
		p("\n%s\n"+head, t.title, t.col, "escalated", "rate", "accuracy", "ECE", "Brier", "decode s/dec", "tokens/dec", "vs big")
		for i := range t.points {
			pt := &t.points[i]
			p("  %-11.2f %9d %7.4f %s%s\n", pt.Threshold, pt.Escalated, pt.EscalationRate, metricCols(pt), marks(pt, t.rec))
		}
	}
	p("\n")
	r.writeRecommendation(w, "recommended         ", RuleTop, r.Recommended)
	r.writeRecommendation(w, "recommended, margin ", RuleMargin, r.RecommendedMargin)
}

func metricCols(pt *CascadePoint) string {
	return fmt.Sprintf("%8.4f %7.4f %7.4f %12.5f %10.1f %7.4f", pt.Accuracy, pt.ECE, pt.Brier, pt.Cost.DecodeSeconds, pt.Cost.Tokens, pt.CostVsBig)
}

func marks(pt, rec *CascadePoint) string {
	s := ""
	if pt.WithinTolerance {
		s = " *"
	}
	if rec != nil && pt.Rule == rec.Rule && pt.Threshold == rec.Threshold {
		s += " recommended"
	}
	return s
}

// RecommendationText says in one line which threshold of a rule to use
// and what it buys, or that none is within tolerance.
func (r *CascadeReport) RecommendationText(rule string, rec *CascadePoint) string {
	if rec == nil {
		return fmt.Sprintf("none: no %s threshold keeps the accuracy within %.4f of the big model's alone (%.4f)", rule, r.Tolerance, r.Big.Accuracy)
	}
	s := fmt.Sprintf("escalate when %s < %.2f: %.1f%% escalated, accuracy %.4f (big alone %.4f), %.5f decode s and %.1f tokens a decision (big alone %.5f and %.1f",
		rule, rec.Threshold, 100*rec.EscalationRate, rec.Accuracy, r.Big.Accuracy, rec.Cost.DecodeSeconds, rec.Cost.Tokens, r.Big.Cost.DecodeSeconds, r.Big.Cost.Tokens)
	if rec.CostVsBig > 0 {
		s += fmt.Sprintf("; %.2f× its decode cost", rec.CostVsBig)
	}
	s += ")"
	if rec.CostVsBig >= 1 {
		s += "; no cheaper than the big model alone: use it alone"
	}
	return s
}

func (r *CascadeReport) writeRecommendation(w io.Writer, label, rule string, rec *CascadePoint) {
	fmt.Fprintf(w, "%s%s\n", label, r.RecommendationText(rule, rec))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
