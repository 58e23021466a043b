// Package quality measures published decisions against the labels
// callers send back (POST /v1/decisions/{id}/feedback): agreement (the
// model's top option against the label), Brier score and expected
// calibration error, per policy kind and model, with the metric
// functions of package eval, so that a figure here is the figure
// `verdict eval` prints on the same labels.
//
// The data flows like this:
//
//   - the front door records an answer and calls Window.Observe with the
//     decision's stored record and its label (never for a replay);
//   - ExampleOf turns the two into an eval.Example and KeyOf names its
//     group (kind, model);
//   - the group's window keeps the latest Config.Size labeled decisions
//     (a decision labeled again moves to the end with its new label);
//   - a Prometheus scrape (Window is a prometheus.Collector) measures
//     every window: verdict_feedback_total{kind,model,agree} counts the
//     answers, verdict_feedback_agreement, _brier, _ece and
//     _window_labels{kind,model} describe the windows now.
//
// Offline, `verdict feedback report` reads the labeled decisions of a
// results store and calls Assess: the same figures over the whole range,
// over consecutive windows ending with the latest (the last one is what
// the live gauges show for the same labels), and Drift's comparison of
// each window with a reference (a calibration's fitted ECE, the first
// full window).
package quality
