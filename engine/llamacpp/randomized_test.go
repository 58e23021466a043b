//go:build cgo

package llamacpp

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
)

// smallSchedules are engine configurations with few cache slots, small
// token and branch budgets and few sequences: many evictions, partial
// reuses, flushes and retries; each with both prefix-cache stores.
var smallSchedules = bothStores(
	Options{PrefixCacheSlots: 2, PrefixCacheTokens: 150, BranchBatchTokens: 64, MaxSequences: 8},
	Options{PrefixCacheSlots: 3, PrefixCacheTokens: 0, BranchBatchTokens: 200, MaxSequences: 16},
	Options{PrefixCacheSlots: 1, BranchBatchTokens: 37, MaxSequences: 4},
)

// bothStores is each of os with the KV store and with the host store.
func bothStores(os ...Options) []Options {
	var out []Options
	for _, o := range os {
		for _, store := range []string{"kv", "host"} {
			o.PrefixCacheStore = store
			out = append(out, o)
		}
	}
	return out
}

// randomDecisions draws n decisions about states that share, extend or
// differ from each other, some with many (multi-token) options.
func randomDecisions(rng *rand.Rand, id string, n int) []decision.Decision {
	base := []string{"abc", "abc\n\nmore text here", "abc\n\nmore text here and even more", "zzz other", "abc\n\nmore", "q"}
	var ds []decision.Decision
	for i := 0; i < n; i++ {
		s := base[rng.Intn(len(base))]
		if rng.Intn(3) == 0 {
			s += strings.Repeat(" x", rng.Intn(5))
		}
		d := routing(fmt.Sprint(id, "-", i), s)
		d.Question = fmt.Sprintf("Q%d %s?", rng.Intn(5), strings.Repeat("why ", rng.Intn(4)))
		if rng.Intn(4) == 0 {
			d = withOptions(d, 27+rng.Intn(4))
			d.Question = "Pick"
		}
		ds = append(ds, d)
	}
	return ds
}

// Random mixes of shared, extending and unrelated states under small
// schedules: every result equals its independent single-sequence
// computation.
func TestRandomizedSchedulesMatchReference(t *testing.T) {
	cfgs := append(slices.Clone(smallSchedules), Options{ContextSize: 512, BranchBatchTokens: 256}, Options{NoPrefixCache: true, BranchBatchTokens: 50})
	for ci, o := range cfgs {
		e := newEngine(t, o)
		rng := rand.New(rand.NewSource(int64(ci)))
		for round := 0; round < 25; round++ {
			ds := randomDecisions(rng, fmt.Sprint(ci, "-", round), 1+rng.Intn(8))
			rs, err := e.Score(context.Background(), ds)
			require.NoError(t, err)
			for i := range ds {
				if rs[i].Error != nil {
					t.Logf("cfg %d: %s error %s", ci, ds[i].ID, rs[i].Error.Message)
					continue
				}
				require.Equal(t, ds[i].ID, rs[i].ID)
				ref := reference(t, e, ds[i])
				d := maxAbsDiff(ref, rs[i].OptionLogits)
				require.Less(t, d, logitTol(2e-3), "cfg %d round %d item %d (%q)", ci, round, i, ds[i].State.Text)
			}
		}
	}
}

// The same random mixes from 8 concurrent callers: rounds gather
// different jobs, and every result still equals its reference.
func TestConcurrentRandomizedSchedulesMatchReference(t *testing.T) {
	cfgs := append(slices.Clone(smallSchedules), Options{})
	for ci, o := range cfgs {
		e := newEngine(t, o)
		var mu sync.Mutex
		type pair struct {
			d decision.Decision
			r decision.Result
		}
		var got []pair
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(ci*100 + g)))
				for k := 0; k < 6; k++ {
					ds := randomDecisions(rng, fmt.Sprint(ci, "-", g, "-", k), 1+rng.Intn(5))
					rs, err := e.Score(context.Background(), ds)
					if err != nil {
						panic(err)
					}
					mu.Lock()
					for i := range ds {
						got = append(got, pair{ds[i], rs[i]})
					}
					mu.Unlock()
					time.Sleep(time.Duration(rng.Intn(3)) * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		worst := 0.0
		for _, p := range got {
			require.Equal(t, p.d.ID, p.r.ID)
			if p.r.Error != nil {
				t.Logf("cfg %d %s: %s", ci, p.d.ID, p.r.Error.Message)
				continue
			}
			d := maxAbsDiff(reference(t, e, p.d), p.r.OptionLogits)
			if d > worst {
				worst = d
			}
			require.Less(t, d, logitTol(2e-3), "cfg %d %s", ci, p.d.ID)
		}
		t.Logf("cfg %d: %d results, worst %.3g", ci, len(got), worst)
	}
}
