//go:build llamacpp

package llamacpp

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/decision"
)

func TestRegressionRandomizedAgainstReference(t *testing.T) {
	base := []string{"abc", "abc\n\nmore text here", "abc\n\nmore text here and even more", "zzz other", "abc\n\nmore", "q"}
	cfgs := []Options{
		{PrefixCacheSlots: 2, PrefixCacheTokens: 150, BranchBatchTokens: 64, MaxSequences: 8},
		{PrefixCacheSlots: 3, PrefixCacheTokens: 0, BranchBatchTokens: 200, MaxSequences: 16},
		{PrefixCacheSlots: 1, BranchBatchTokens: 37, MaxSequences: 4},
		{ContextSize: 512, BranchBatchTokens: 256},
		{NoPrefixCache: true, BranchBatchTokens: 50},
	}
	for ci, o := range cfgs {
		e := newEngine(t, o)
		rng := rand.New(rand.NewSource(int64(ci)))
		for round := 0; round < 25; round++ {
			var ds []decision.Decision
			n := 1 + rng.Intn(8)
			for i := 0; i < n; i++ {
				s := base[rng.Intn(len(base))]
				if rng.Intn(3) == 0 {
					s += strings.Repeat(" x", rng.Intn(5))
				}
				d := routing(fmt.Sprint(ci, "-", round, "-", i), s)
				d.Question = fmt.Sprintf("Q%d %s?", rng.Intn(5), strings.Repeat("why ", rng.Intn(4)))
				if rng.Intn(4) == 0 {
					d = withOptions(d, 27+rng.Intn(4))
					d.Question = "Pick"
				}
				ds = append(ds, d)
			}
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
				require.Less(t, d, 2e-3, "cfg %d round %d item %d (%q)", ci, round, i, ds[i].State.Text)
			}
		}
	}
}
