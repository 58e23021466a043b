package eval

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the report as aligned plain text.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("labeled decisions   %d (valid %d; skipped, gold unknown: %d; without gold: %d)\n", r.Labeled, r.Valid, r.Skipped, r.Unmatched)
	p("accuracy            %.4f\n", r.Accuracy)
	p("balanced accuracy   %.4f\n", r.BalancedAccuracy)
	p("valid rate          %.4f\n", r.ValidRate)
	p("latency p50 / p95   %.1f / %.1f ms\n", r.LatencyP50, r.LatencyP95)
	p("ECE (%d bins)       %.4f\n", len(r.Bins), r.ECE)
	p("Brier               %.4f\n", r.Brier)
	p("NLL                 %.4f\n", r.NLL)
	p("position bias (TV)  %.4f\n", r.PositionBias)
	p("\nreliability (top probability)\n  %-11s %7s %10s %9s %7s\n", "bin", "count", "confidence", "accuracy", "gap")
	for _, b := range r.Bins {
		if b.Count == 0 {
			p("  [%.2f,%.2f) %7d\n", b.Lo, b.Hi, 0)
			continue
		}
		p("  [%.2f,%.2f) %7d %10.4f %9.4f %+7.4f\n", b.Lo, b.Hi, b.Count, b.Confidence, b.Accuracy, b.Accuracy-b.Confidence)
	}
	p("\nposition bias\n  %-8s %8s %8s %8s %11s %9s\n", "position", "offered", "chosen", "gold", "chosen rate", "gold rate")
	for _, q := range r.Positions {
		p("  %-8s %8d %8d %8d %11.4f %9.4f\n", label(q.Index), q.Offered, q.Chosen, q.Gold, q.ChosenRate, q.GoldRate)
	}
	p("\ncoverage vs accuracy\n  %-9s %8s %9s %9s\n", "p_max ≥", "answered", "coverage", "accuracy")
	for _, c := range r.Coverage {
		p("  %-9.2f %8d %9.4f %9.4f\n", c.Threshold, c.Answered, c.Coverage, c.Accuracy)
	}
	p("\nbreakdown\n  %-28s %-8s %7s %8s %7s %7s %7s\n", "family", "type", "n", "accuracy", "valid", "ECE", "NLL")
	for _, b := range r.Breakdown {
		p("  %-28s %-8s %7d %8.4f %7.4f %7.4f %7.4f\n", trunc(b.Family, 28), b.Type, b.Labeled, b.Accuracy, b.ValidRate, b.ECE, b.NLL)
	}
	for k, v := range r.Notes {
		p("\n%s: %s\n", k, v)
	}
}

func label(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return fmt.Sprint(i + 1)
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// SVG writes a reliability diagram: per-bin accuracy bars against the
// diagonal of perfect calibration, the gap to each bin's mean confidence
// shaded, and below it the number of decisions per bin.
func (r *Report) SVG(w io.Writer, title string) error {
	const (
		W, H          = 720, 640
		left, right   = 70, 30
		top           = 70
		plotH, histH  = 380, 110
		gapY          = 40
		plotW         = W - left - right
		histTop       = top + plotH + gapY
		axisColor     = "#444"
		barColor      = "#3b6fb6"
		gapColor      = "#e4572e"
		diagonalColor = "#999"
	)
	var b strings.Builder
	f := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	x := func(v float64) float64 { return left + v*plotW }
	y := func(v float64) float64 { return top + (1-v)*plotH }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", W, H, W, H)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f(`<text x="%d" y="28" font-size="18" font-weight="bold">%s</text>`+"\n", left, xmlEscape(title))
	f(`<text x="%d" y="50" font-size="13" fill="#333">ECE %.4f · accuracy %.4f · Brier %.4f · NLL %.4f · n = %d valid of %d</text>`+"\n", left, r.ECE, r.Accuracy, r.Brier, r.NLL, r.Valid, r.Labeled)
	// grid and axes
	for i := 0; i <= 10; i += 2 {
		v := float64(i) / 10
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(0), y(v), x(1), y(v))
		f(`<text x="%.1f" y="%.1f" font-size="11" text-anchor="end" fill="%s">%.1f</text>`+"\n", x(0)-6, y(v)+4, axisColor, v)
		f(`<text x="%.1f" y="%d" font-size="11" text-anchor="middle" fill="%s">%.1f</text>`+"\n", x(v), top+plotH+16, axisColor, v)
	}
	n := len(r.Bins)
	for i, bin := range r.Bins {
		if bin.Count == 0 {
			continue
		}
		bw := float64(plotW) / float64(n)
		x0 := x(float64(i)/float64(n)) + 1
		f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.85"><title>[%.2f, %.2f): %d decisions, accuracy %.3f, confidence %.3f</title></rect>`+"\n",
			x0, y(bin.Accuracy), bw-2, float64(plotH)*bin.Accuracy, barColor, bin.Lo, bin.Hi, bin.Count, bin.Accuracy, bin.Confidence)
		lo, hi := min(bin.Accuracy, bin.Confidence), max(bin.Accuracy, bin.Confidence)
		f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" opacity="0.35" stroke="%s" stroke-width="1"/>`+"\n",
			x0, y(hi), bw-2, float64(plotH)*(hi-lo), gapColor, gapColor)
		f(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x0+(bw-2)/2, y(bin.Confidence), gapColor)
	}
	f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="6 4" stroke-width="1.5"/>`+"\n", x(0), y(0), x(1), y(1), diagonalColor)
	f(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", left, top, plotW, plotH, axisColor)
	f(`<text x="%d" y="%.1f" font-size="12" transform="rotate(-90 %d %.1f)" text-anchor="middle">accuracy in bin</text>`+"\n", 22, y(0.5), 22, y(0.5))
	// legend
	lx, ly := left+12, top+16
	f(`<rect x="%d" y="%d" width="12" height="12" fill="%s" opacity="0.85"/><text x="%d" y="%d" font-size="12">accuracy</text>`+"\n", lx, ly-10, barColor, lx+18, ly)
	f(`<rect x="%d" y="%d" width="12" height="12" fill="%s" opacity="0.35" stroke="%s"/><text x="%d" y="%d" font-size="12">gap to mean confidence (dot)</text>`+"\n", lx, ly+8, gapColor, gapColor, lx+18, ly+18)
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-dasharray="6 4" stroke-width="1.5"/><text x="%d" y="%d" font-size="12">perfect calibration</text>`+"\n", lx, ly+32, lx+12, ly+32, diagonalColor, lx+18, ly+36)
	// histogram of counts
	maxCount := 1
	for _, bin := range r.Bins {
		maxCount = max(maxCount, bin.Count)
	}
	for i, bin := range r.Bins {
		bw := float64(plotW) / float64(n)
		h := float64(histH) * float64(bin.Count) / float64(maxCount)
		x0 := x(float64(i)/float64(n)) + 1
		f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#8a8a8a"/>`+"\n", x0, float64(histTop+histH)-h, bw-2, h)
		f(`<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#333">%d</text>`+"\n", x0+(bw-2)/2, float64(histTop+histH)-h-4, bin.Count)
	}
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", left, histTop+histH, left+plotW, histTop+histH, axisColor)
	f(`<text x="%.1f" y="%d" font-size="12" text-anchor="middle">top probability (confidence bin) · bars below: decisions per bin</text>`+"\n", x(0.5), histTop+histH+22)
	f("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func xmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}
