package quality

import "github.com/prometheus/client_golang/prometheus"

// The series a Window exposes. Register the Window itself:
// reg.MustRegister(w).
var (
	descTotal = prometheus.NewDesc("verdict_feedback_total",
		"Labels recorded through the feedback call (replays excluded), by policy kind, model and whether the model's top option agreed with the label (an error result never agrees).",
		[]string{"kind", "model", "agree"}, nil)
	descLabels = prometheus.NewDesc("verdict_feedback_window_labels",
		"Labeled decisions in the sliding window the feedback gauges are measured over, by policy kind and model.",
		[]string{"kind", "model"}, nil)
	descAgreement = prometheus.NewDesc("verdict_feedback_agreement",
		"Share of the window's labeled decisions whose top option is the label (verdict eval's accuracy), by policy kind and model.",
		[]string{"kind", "model"}, nil)
	descBrier = prometheus.NewDesc("verdict_feedback_brier",
		"Brier score of the window's labeled decisions (0 perfect, 2 confidently wrong), by policy kind and model.",
		[]string{"kind", "model"}, nil)
	descECE = prometheus.NewDesc("verdict_feedback_ece",
		"Expected calibration error of the window's labeled decisions (equal-width bins of the top probability), by policy kind and model.",
		[]string{"kind", "model"}, nil)
)

var _ prometheus.Collector = (*Window)(nil)

// Describe sends the descriptions of the Window's series.
func (w *Window) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTotal, descLabels, descAgreement, descBrier, descECE} {
		ch <- d
	}
}

// Collect measures every window (Snapshot) and sends its series.
func (w *Window) Collect(ch chan<- prometheus.Metric) {
	for _, g := range w.Snapshot() {
		ch <- prometheus.MustNewConstMetric(descTotal, prometheus.CounterValue, float64(g.Agreed), g.Kind, g.Model, "true")
		ch <- prometheus.MustNewConstMetric(descTotal, prometheus.CounterValue, float64(g.Disagreed), g.Kind, g.Model, "false")
		ch <- prometheus.MustNewConstMetric(descLabels, prometheus.GaugeValue, float64(g.Window.Labels), g.Kind, g.Model)
		ch <- prometheus.MustNewConstMetric(descAgreement, prometheus.GaugeValue, g.Window.Agreement, g.Kind, g.Model)
		ch <- prometheus.MustNewConstMetric(descBrier, prometheus.GaugeValue, g.Window.Brier, g.Kind, g.Model)
		ch <- prometheus.MustNewConstMetric(descECE, prometheus.GaugeValue, g.Window.ECE, g.Kind, g.Model)
	}
}
