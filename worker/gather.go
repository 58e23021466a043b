package worker

import (
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// PoolsHandler serves the metrics of several workers in one exposition,
// each series labelled with its pool's name (label "queue"): `verdict up`
// with a cpu and a gpu queue, one worker each. The gatherers in more are
// served beside them, as they are (up's live feedback quality).
func PoolsHandler(pools map[string]*Worker, more ...prometheus.Gatherer) http.Handler {
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		byName := map[string]*dto.MetricFamily{}
		names := make([]string, 0, len(pools))
		for n := range pools {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, pool := range names {
			fams, err := pools[pool].Registry().Gather()
			if err != nil {
				return nil, err
			}
			for _, f := range fams {
				merged, ok := byName[f.GetName()]
				if !ok {
					merged = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
					byName[f.GetName()] = merged
				}
				for _, m := range f.Metric {
					m = proto.Clone(m).(*dto.Metric)
					m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("queue"), Value: proto.String(pool)})
					sort.Slice(m.Label, func(i, j int) bool { return m.Label[i].GetName() < m.Label[j].GetName() })
					merged.Metric = append(merged.Metric, m)
				}
			}
		}
		out := make([]*dto.MetricFamily, 0, len(byName))
		for _, f := range byName {
			out = append(out, f)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
		return out, nil
	})
	return promhttp.HandlerFor(append(prometheus.Gatherers{g}, more...), promhttp.HandlerOpts{})
}
