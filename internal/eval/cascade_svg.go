package eval

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// SVG writes the accuracy–cost curve of the cascade: decode seconds per
// decision across, accuracy up; one line per rule through its thresholds,
// each model alone as a square, the tolerance floor dashed and the
// recommended threshold ringed. Every point's <title> holds its numbers.
func (r *CascadeReport) SVG(w io.Writer, title string) error {
	const (
		W, H        = 720, 560
		left, right = 70, 30
		top         = 80
		plotH       = 400
		plotW       = W - left - right
		axisColor   = "#444"
		topColor    = "#3b6fb6"
		marginColor = "#e4572e"
		aloneColor  = "#222"
		floorColor  = "#999"
	)
	all := append(append([]CascadePoint{r.Small, r.Big}, r.Top...), r.Margin...)
	xMax, yLo, yHi := 0.0, 1.0, 0.0
	for _, p := range all {
		xMax = math.Max(xMax, p.Cost.DecodeSeconds)
		yLo, yHi = math.Min(yLo, p.Accuracy), math.Max(yHi, p.Accuracy)
	}
	floor := r.Big.Accuracy - r.Tolerance
	yLo = math.Min(yLo, floor)
	yLo = math.Max(0, math.Floor((yLo-0.02)*20)/20)
	yHi = math.Min(1, math.Ceil((yHi+0.02)*20)/20)
	if yHi-yLo < 0.1 {
		yLo = math.Max(0, yHi-0.1)
		yHi = yLo + 0.1
	}
	if xMax <= 0 {
		xMax = 1
	}
	xMax *= 1.05
	var b strings.Builder
	f := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	x := func(v float64) float64 { return left + v/xMax*plotW }
	y := func(v float64) float64 { return top + (yHi-v)/(yHi-yLo)*plotH }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", W, H, W, H)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f(`<text x="%d" y="28" font-size="18" font-weight="bold">%s</text>`+"\n", left, xmlEscape(title))
	sub := "no threshold within tolerance"
	if rec := r.Recommended; rec != nil {
		sub = fmt.Sprintf("recommended p_max &lt; %.2f: %.1f%% escalated, accuracy %.4f at %.2f× the big model's decode cost", rec.Threshold, 100*rec.EscalationRate, rec.Accuracy, rec.CostVsBig)
	}
	f(`<text x="%d" y="50" font-size="13" fill="#333">%s</text>`+"\n", left, sub)
	f(`<text x="%d" y="68" font-size="13" fill="#333">small alone %.4f · big alone %.4f · tolerance %.4f · n = %d labeled</text>`+"\n", left, r.Small.Accuracy, r.Big.Accuracy, r.Tolerance, r.Labeled)
	// grid and axes
	for i := 0; i <= 5; i++ {
		vy := yLo + (yHi-yLo)*float64(i)/5
		vx := xMax * float64(i) / 5
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(0), y(vy), x(xMax), y(vy))
		f(`<text x="%.1f" y="%.1f" font-size="11" text-anchor="end" fill="%s">%.3f</text>`+"\n", x(0)-6, y(vy)+4, axisColor, vy)
		f(`<text x="%.1f" y="%d" font-size="11" text-anchor="middle" fill="%s">%.3g</text>`+"\n", x(vx), top+plotH+16, axisColor, vx)
	}
	f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="6 4" stroke-width="1.5"/>`+"\n", x(0), y(floor), x(xMax), y(floor), floorColor)
	for _, s := range []struct {
		points []CascadePoint
		color  string
		dash   string
	}{{r.Top, topColor, ""}, {r.Margin, marginColor, ` stroke-dasharray="3 3"`}} {
		var path []string
		for _, p := range s.points {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.Cost.DecodeSeconds), y(p.Accuracy)))
		}
		f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"%s/>`+"\n", strings.Join(path, " "), s.color, s.dash)
		for i := range s.points {
			p := &s.points[i]
			f(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s</title></circle>`+"\n", x(p.Cost.DecodeSeconds), y(p.Accuracy), s.color, pointTitle(p))
		}
	}
	for _, a := range []struct {
		name string
		p    *CascadePoint
	}{{"small alone", &r.Small}, {"big alone", &r.Big}} {
		cx, cy := x(a.p.Cost.DecodeSeconds), y(a.p.Accuracy)
		f(`<rect x="%.1f" y="%.1f" width="9" height="9" fill="%s"><title>%s: accuracy %.4f, %.5f decode s and %.1f tokens a decision</title></rect>`+"\n", cx-4.5, cy-4.5, aloneColor, a.name, a.p.Accuracy, a.p.Cost.DecodeSeconds, a.p.Cost.Tokens)
		f(`<text x="%.1f" y="%.1f" font-size="12" fill="%s">%s</text>`+"\n", cx+8, cy-8, aloneColor, a.name)
	}
	for _, rec := range []*CascadePoint{r.Recommended, r.RecommendedMargin} {
		if rec != nil {
			f(`<circle cx="%.1f" cy="%.1f" r="9" fill="none" stroke="%s" stroke-width="2"/>`+"\n", x(rec.Cost.DecodeSeconds), y(rec.Accuracy), aloneColor)
		}
	}
	f(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", left, top, plotW, plotH, axisColor)
	f(`<text x="%d" y="%.1f" font-size="12" transform="rotate(-90 %d %.1f)" text-anchor="middle">accuracy</text>`+"\n", 22, y((yLo+yHi)/2), 22, y((yLo+yHi)/2))
	f(`<text x="%.1f" y="%d" font-size="12" text-anchor="middle">decode seconds per decision (small model for all, plus big model for the escalated)</text>`+"\n", x(xMax/2), top+plotH+36)
	// legend, bottom right of the plot
	lx, ly := left+plotW-260, top+plotH-72
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/><text x="%d" y="%d" font-size="12">escalate when p_max &lt; t</text>`+"\n", lx, ly, lx+16, ly, topColor, lx+22, ly+4)
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="3 3"/><text x="%d" y="%d" font-size="12">escalate when margin &lt; m</text>`+"\n", lx, ly+18, lx+16, ly+18, marginColor, lx+22, ly+22)
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-dasharray="6 4" stroke-width="1.5"/><text x="%d" y="%d" font-size="12">big alone − tolerance</text>`+"\n", lx, ly+36, lx+16, ly+36, floorColor, lx+22, ly+40)
	f(`<circle cx="%d" cy="%d" r="7" fill="none" stroke="%s" stroke-width="2"/><text x="%d" y="%d" font-size="12">recommended (cheapest within tolerance)</text>`+"\n", lx+8, ly+54, aloneColor, lx+22, ly+58)
	f("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func pointTitle(p *CascadePoint) string {
	return fmt.Sprintf("%s &lt; %.2f: %d escalated (%.1f%%), accuracy %.4f, ECE %.4f, Brier %.4f, %.5f decode s and %.1f tokens a decision",
		p.Rule, p.Threshold, p.Escalated, 100*p.EscalationRate, p.Accuracy, p.ECE, p.Brier, p.Cost.DecodeSeconds, p.Cost.Tokens)
}
