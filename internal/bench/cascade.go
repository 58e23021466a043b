//go:build cgo

package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/policy"
)

// DefaultCascadeEscalate is the share of decisions the cascade workload
// sends on to the big model when no threshold is given.
const DefaultCascadeEscalate = 0.3

// cascadeThreshold is the p_max bound under which the small model's
// answer escalates: cfg.CascadeBelow when set, else the quantile of the
// small model's top probabilities that escalates cfg.CascadeEscalate of
// the decisions (synthetic models say nothing of accuracy, so the bound
// is chosen for a known escalation rate).
func cascadeThreshold(ctx context.Context, cfg Config, small engine.Scorer, ds []decision.Decision) (float64, error) {
	if cfg.CascadeBelow > 0 {
		return cfg.CascadeBelow, nil
	}
	rs, err := scoreChecked(ctx, small, ds)
	if err != nil {
		return 0, err
	}
	tops := make([]float64, len(rs))
	for i := range rs {
		tops[i] = slices.Max(rs[i].Probabilities)
	}
	slices.Sort(tops)
	k := int(math.Round(cfg.CascadeEscalate * float64(len(tops))))
	if k <= 0 {
		return tops[0] / 2, nil
	}
	if k >= len(tops) {
		return 1, nil
	}
	// Halfway between the k-th smallest and the next: exactly k escalate.
	return (tops[k-1] + tops[k]) / 2, nil
}

// cascadePolicy escalates every decision whose top probability is below
// t from the cpu pool to the gpu pool: the same policy code the workers
// run.
func cascadePolicy(t float64) (*policy.Policy, error) {
	return policy.Parse([]byte(fmt.Sprintf("kinds:\n  default:\n    escalate: {below: %g, to: gpu}\n", math.Min(t, 1))))
}

// runCascade measures W4: a small model first, the big one (cfg.Model)
// only for the decisions the small one is unsure of, against the big model
// alone, on W3's independent decisions sent one at a time (a serial
// caller). The cascade's stages run one after the other, each decision's
// latency its stages' together; decisions/s counts both stages' time.
// Both modes get new engines every round.
func runCascade(ctx context.Context, cfg Config, rep *Report, fresh *llamacpp.Engine, threads int) error {
	const name = "W4 cascade"
	ds, err := independent(fresh, cfg.CascadeDecisions, cfg.IndependentTokens)
	if err != nil {
		return err
	}
	smallLayers := cfg.GPULayers
	if cfg.CascadeSmallGPULayers != nil {
		smallLayers = *cfg.CascadeSmallGPULayers
	}
	openWith := func(path string, layers int) (*llamacpp.Engine, error) {
		return llamacpp.New(llamacpp.Options{ModelPath: path, Threads: cfg.Threads, GPULayers: layers, FlashAttention: cfg.FlashAttention,
			BranchBatchTokens: cfg.BranchBatchTokens, PrefixCacheTokens: cfg.PrefixCacheTokens, PrefixCacheStore: cfg.PrefixCacheStore})
	}
	openSmall := func() (*llamacpp.Engine, error) { return openWith(cfg.CascadeSmall, smallLayers) }
	openBig := func() (*llamacpp.Engine, error) { return openWith(cfg.Model, cfg.GPULayers) }
	small, err := openSmall()
	if err != nil {
		return fmt.Errorf("cascade small model: %w", err)
	}
	smallName := small.Identity().Name
	if b := small.Identity().Backend; b != fresh.Identity().Backend {
		smallName += " (" + b + ")"
	}
	t, err := cascadeThreshold(ctx, cfg, small, ds)
	small.Close()
	if err != nil {
		return err
	}
	pol, err := cascadePolicy(t)
	if err != nil {
		return err
	}
	bigName := fresh.Identity().Name
	fmt.Fprintf(cfg.Log, "%s: %d decisions, small %s, big %s, escalate below p_max %.4f, %d rounds\n", name, len(ds), smallName, bigName, t, cfg.Rounds)

	escalated := make([]int, cfg.Rounds)
	round := 0
	mk := func(mode, model string) Row {
		return Row{Workload: name, Mode: mode, Model: model, Threads: threads, Decisions: len(ds)}
	}
	modes := []func() (Row, error){
		func() (Row, error) {
			fmt.Fprintf(cfg.Log, "%s: big alone\n", name)
			big, err := openBig()
			if err != nil {
				return Row{}, err
			}
			defer big.Close()
			row := mk("big alone", bigName)
			err = measure(big, &row, func() ([]time.Duration, error) { return scoreOne(ctx, big, ds) })
			return row, err
		},
		func() (Row, error) {
			fmt.Fprintf(cfg.Log, "%s: cascade\n", name)
			small, err := openSmall()
			if err != nil {
				return Row{}, err
			}
			defer small.Close()
			big, err := openBig()
			if err != nil {
				return Row{}, err
			}
			defer big.Close()
			row := mk("cascade", smallName+"→"+bigName)
			n := 0
			// The stages run one after the other, as two pools on machines
			// of their own would: on one machine two engines' threads
			// spinning at once slow each other, so the bench waits for the
			// CPUs to be quiet between them (not timed).
			err = measureAll([]*llamacpp.Engine{small, big}, &row, func() ([]time.Duration, time.Duration, error) {
				first := policy.Stage{Pool: decision.RouteCPU, Pools: []decision.Route{decision.RouteCPU, decision.RouteGPU}}
				lat := make([]time.Duration, len(ds))
				var up []int
				for i, d := range ds {
					start := time.Now()
					o, err := applyOne(ctx, pol, first, small, d)
					if err != nil {
						return nil, 0, err
					}
					lat[i] = time.Since(start)
					if o != nil && o.Status == decision.StatusEscalate {
						up = append(up, i)
					}
				}
				pause := time.Now()
				Quiet(ctx, cfg.Settle)
				untimed := time.Since(pause)
				for _, i := range up {
					start := time.Now()
					if _, err := applyOne(ctx, pol, first.Next(decision.RouteGPU), big, ds[i]); err != nil {
						return nil, 0, err
					}
					lat[i] += time.Since(start)
				}
				n = len(up)
				return lat, untimed, nil
			})
			escalated[round] = n
			round++
			return row, err
		},
	}
	samples, err := runRounds(cfg.Rounds, cfg.Settle, modes)
	if err != nil {
		return err
	}
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("%s: escalated %d of %d decisions (%.0f%%) below p_max %.4f of %s; the policy's escalate clause decides, as on a worker",
			name, escalated[0], len(ds), 100*float64(escalated[0])/float64(len(ds)), t, smallName),
		together(name+": cascade vs big alone", samples[0], samples[1]))
	for _, s := range samples {
		r := s.median()
		ratios := make([]float64, len(s))
		for k := range s {
			ratios[k] = s[k].DecisionsPerSec / samples[0][k].DecisionsPerSec
		}
		r.SpeedupVsFresh, r.SpeedupMin, r.SpeedupMax = Spread(ratios)
		r.EscalationRate = 0
		if r.Mode == "cascade" {
			r.EscalationRate = float64(escalated[0]) / float64(len(ds))
		}
		rep.Rows = append(rep.Rows, r)
	}
	return nil
}

// applyOne scores d on sc at stage st under the cascade policy and returns
// its outcome.
func applyOne(ctx context.Context, p *policy.Policy, st policy.Stage, sc engine.Scorer, d decision.Decision) (*decision.Outcome, error) {
	rs, err := p.Apply(ctx, policy.Caller{Stage: st}, []decision.Decision{d}, sc.Score)
	if err != nil {
		return nil, err
	}
	if err := resultError(rs); err != nil {
		return nil, err
	}
	return rs[0].Outcome, nil
}

// measureAll is measure over several engines (their counters summed),
// leaving out of the wall time what fn says it spent untimed.
func measureAll(es []*llamacpp.Engine, row *Row, fn func() (lat []time.Duration, untimed time.Duration, err error)) error {
	before := make([]llamacpp.Stats, len(es))
	for i, e := range es {
		before[i] = e.Stats()
	}
	start := time.Now()
	lat, untimed, err := fn()
	if err != nil {
		return err
	}
	wall := time.Since(start) - untimed
	row.WallSeconds = wall.Seconds()
	row.DecisionsPerSec = float64(row.Decisions) / wall.Seconds()
	row.P50Ms, row.P95Ms = pct(lat, 50), pct(lat, 95)
	var decode int64
	for i, e := range es {
		after := e.Stats()
		row.TokensSubmitted += after.TokensSubmitted - before[i].TokensSubmitted
		row.TokensEvaluated += after.TokensEvaluated - before[i].TokensEvaluated
		decode += after.DecodeNanos - before[i].DecodeNanos
	}
	row.DecodeShare = float64(decode) / 1e9 / wall.Seconds()
	return nil
}

// resultError is the first per-decision error of rs.
func resultError(rs []decision.Result) error {
	for _, r := range rs {
		if r.Error != nil {
			return fmt.Errorf("bench: %s: %s", r.ID, r.Error.Message)
		}
	}
	return nil
}
