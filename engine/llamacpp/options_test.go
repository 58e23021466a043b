package llamacpp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Options given out of range are refused with the field's name, never
// adjusted; zero values take their defaults.
func TestOptionsRefuseValuesOutOfRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		o     Options
		field string // "" = valid
	}{
		{"defaults", Options{}, ""},
		{"no model", Options{ModelPath: "-"}, ""},
		{"negative threads", Options{Threads: -2}, "Options.Threads"},
		{"tiny context", Options{ContextSize: 32}, "Options.ContextSize"},
		{"negative batch", Options{BatchSize: -1}, "Options.BatchSize"},
		{"ubatch above batch", Options{BatchSize: 256, UBatchSize: 512}, "Options.UBatchSize"},
		{"batch below the sequences", Options{BatchSize: 32, UBatchSize: 32}, "Options.BatchSize"},
		{"context below the sequences", Options{ContextSize: 64, MaxSequences: 128}, "Options.ContextSize"},
		{"small batch, few sequences", Options{BatchSize: 32, UBatchSize: 32, MaxSequences: 16}, ""},
		{"two sequences", Options{MaxSequences: 2}, "Options.MaxSequences"},
		{"too many sequences", Options{MaxSequences: 300}, "Options.MaxSequences"},
		{"cache slots leave one branch", Options{MaxSequences: 8, PrefixCacheSlots: 7}, "Options.PrefixCacheSlots"},
		{"cache slots above half the sequences are honoured", Options{MaxSequences: 8, PrefixCacheSlots: 6}, ""},
		{"negative cache slots", Options{PrefixCacheSlots: -1}, "Options.PrefixCacheSlots"},
		{"negative cache tokens", Options{PrefixCacheTokens: -1}, "Options.PrefixCacheTokens"},
		{"negative head batch", Options{HeadBatchTokens: -1}, "Options.HeadBatchTokens"},
		{"negative branch budget", Options{BranchBatchTokens: -1}, "Options.BranchBatchTokens"},
		{"branch budget above the batch", Options{BatchSize: 512, UBatchSize: 512, BranchBatchTokens: 1024}, "Options.BranchBatchTokens"},
		{"negative round", Options{MaxRoundDecisions: -1}, "Options.MaxRoundDecisions"},
		{"negative recurrent memory", Options{RecurrentMemory: -1}, "Options.RecurrentMemory"},
		{"negative pending", Options{MaxPending: -5}, "Options.MaxPending"},
		{"unknown flash attention", Options{FlashAttention: "sometimes"}, "Options.FlashAttention"},
		{"unknown mmap", Options{Mmap: "sometimes"}, "Options.Mmap"},
		{"unknown cache store", Options{PrefixCacheStore: "disk"}, "Options.PrefixCacheStore"},
		{"host store for a recurrent model", Options{PrefixCacheStore: "host", recurrentModel: true}, "Options.PrefixCacheStore"},
		{"kv store for a recurrent model", Options{PrefixCacheStore: "kv", recurrentModel: true}, ""},
		{"host store on a GPU", Options{PrefixCacheStore: "host", GPULayers: -1}, ""},
		{"gpu layers below -1", Options{GPULayers: -2}, "Options.GPULayers"},
		{"negative temperature", Options{Temperature: -1}, "Options.Temperature"},
		{"NaN temperature", Options{Temperature: math.NaN()}, "Options.Temperature"},
		{"infinite temperature", Options{Temperature: math.Inf(1)}, "Options.Temperature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			if o.ModelPath == "" {
				o.ModelPath = "m.gguf"
			} else if o.ModelPath == "-" {
				o.ModelPath = ""
				tc.field = "Options.ModelPath"
			}
			err := o.withDefaults().validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.field)
		})
	}
}

// Given values stay as given; only zero values take defaults, and derived
// defaults follow the fields they derive from.
func TestOptionsDefaultsOnlyForUnset(t *testing.T) {
	t.Parallel()
	d := Options{FlashAttention: "off"}.withDefaults()
	require.Equal(t, 8192, d.ContextSize)
	require.Equal(t, 2048, d.BatchSize)
	require.Equal(t, 512, d.UBatchSize)
	require.Equal(t, 128, d.MaxSequences)
	require.Equal(t, 16, d.PrefixCacheSlots)
	require.Equal(t, "off", d.FlashAttention)
	require.Equal(t, 128, d.BranchBatchTokens)
	require.Equal(t, "host", d.PrefixCacheStore, "the CPU: cached states wait in host memory")
	require.Equal(t, 4096, d.PrefixCacheTokens, "the host store: ctx/2")
	require.Equal(t, 1.0, d.Temperature)
	require.Equal(t, int64(1<<30), d.RecurrentMemory)

	require.Equal(t, 3, Options{MaxSequences: 6}.withDefaults().PrefixCacheSlots, "default slots: half the sequences")
	require.Equal(t, 6, Options{MaxSequences: 8, PrefixCacheSlots: 6}.withDefaults().PrefixCacheSlots, "given slots kept")
	require.Equal(t, 100, Options{FlashAttention: "off", BatchSize: 100, UBatchSize: 100}.withDefaults().BranchBatchTokens, "the plain path: 128, or the batch when less")
	require.Equal(t, 200, Options{FlashAttention: "on", BatchSize: 200, UBatchSize: 200}.withDefaults().BranchBatchTokens, "flash attention: the batch")
	require.Equal(t, 1024, Options{BatchSize: 512, UBatchSize: 512, BranchBatchTokens: 1024}.withDefaults().BranchBatchTokens, "given budget kept (and refused by validate)")
	require.Equal(t, "on", Options{}.withDefaults().FlashAttention, "auto: on, on the CPU too")
	on := Options{GPULayers: -1}.withDefaults()
	require.Equal(t, "on", on.FlashAttention)
	require.Equal(t, 2048, on.BranchBatchTokens)
	require.Equal(t, 4096, on.PrefixCacheTokens, "a GPU: ctx/2 resident")
	require.Equal(t, "kv", on.PrefixCacheStore, "a GPU: resident in the KV cache")
	require.Equal(t, "on", on.Mmap, "a GPU: the weights go to the device, the file stays mapped")
	require.Equal(t, map[bool]string{true: "off", false: "on"}[hugeMalloc()], d.Mmap,
		"the CPU: read into memory where large allocations get huge pages")
	require.Equal(t, "off", Options{GPULayers: -1, Mmap: "off"}.withDefaults().Mmap, "given kept")
	require.Equal(t, "on", Options{Mmap: "on"}.withDefaults().Mmap, "given kept")
	require.Equal(t, "kv", Options{recurrentModel: true}.withDefaults().PrefixCacheStore, "recurrent layers: the KV store")
	cpuOn := Options{FlashAttention: "on"}.withDefaults()
	require.Equal(t, 2048, cpuOn.BranchBatchTokens)
	require.Equal(t, 4096, cpuOn.PrefixCacheTokens)
	cpuKV := Options{FlashAttention: "on", PrefixCacheStore: "kv"}.withDefaults()
	require.Equal(t, 1024, cpuKV.PrefixCacheTokens, "the CPU with the KV store, flash attention or not: 1,024 resident")
	require.Equal(t, 1024, Options{FlashAttention: "off", PrefixCacheStore: "kv"}.withDefaults().PrefixCacheTokens)
	require.Equal(t, 1, cpuOn.HeadBatchTokens, "the CPU: one fresh state per sub-round")
	require.Equal(t, 2048, on.HeadBatchTokens, "a GPU: the branch budget")
	require.Equal(t, 100, Options{HeadBatchTokens: 100}.withDefaults().HeadBatchTokens, "given kept")
	require.Equal(t, 300, Options{ContextSize: 600}.withDefaults().PrefixCacheTokens, "never above ctx/2")
	require.Equal(t, 300, Options{ContextSize: 600, PrefixCacheStore: "kv"}.withDefaults().PrefixCacheTokens, "never above ctx/2")
}

// Flash attention widens the drift between paths; the plain path adds none.
func TestDriftOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, Drift{}, DriftOf(Options{FlashAttention: "off"}))
	require.Equal(t, Drift{Logits: 1e-2, Probabilities: 1e-3, LabelSums: 8e-2}, DriftOf(Options{FlashAttention: "on"}))
	require.Equal(t, DriftOf(Options{FlashAttention: "on"}), DriftOf(Options{}), "auto is on")
}

// withDefaults resolves every field, for representative inputs, to the
// values pinned here: the device (CPU or GPU layers), flash attention,
// recurrent layers, the prefix-cache store, given values and small sizes.
// Each row states its input and the fields it resolves differently from
// the CPU defaults.
func TestOptionsResolvedDefaults(t *testing.T) {
	t.Parallel()
	cpuMmap := "on"
	if hugeMalloc() {
		cpuMmap = "off"
	}
	cpu := Options{
		Threads: physicalCores(), ContextSize: 8192, BatchSize: 2048, UBatchSize: 512, MaxSequences: 128,
		RecurrentMemory: 1 << 30, MaxPending: 1024, Temperature: 1, PrefixCacheSlots: 16, PrefixCacheTokens: 4096,
		PrefixCacheStore: "host", FlashAttention: "on", BranchBatchTokens: 2048, HeadBatchTokens: 1,
		MaxRoundDecisions: 256, Mmap: cpuMmap,
	}
	with := func(o Options, set func(*Options)) Options {
		set(&o)
		return o
	}
	gpu := with(cpu, func(o *Options) {
		o.GPULayers, o.Mmap, o.PrefixCacheStore, o.HeadBatchTokens = -1, "on", "kv", 2048
	})
	for _, tc := range []struct {
		name string
		in   Options
		want Options
	}{
		{"cpu", Options{}, cpu},
		{"cpu, auto spelled out", Options{FlashAttention: "auto", PrefixCacheStore: "auto", Mmap: "auto"}, cpu},
		{"cpu, flash attention on", Options{FlashAttention: "on"}, cpu},
		{"cpu, flash attention off", Options{FlashAttention: "off"},
			with(cpu, func(o *Options) { o.FlashAttention, o.BranchBatchTokens = "off", 128 })},
		{"cpu, kv store", Options{PrefixCacheStore: "kv"},
			with(cpu, func(o *Options) { o.PrefixCacheStore, o.PrefixCacheTokens = "kv", 1024 })},
		{"cpu, kv store, flash attention off", Options{PrefixCacheStore: "kv", FlashAttention: "off"},
			with(cpu, func(o *Options) {
				o.PrefixCacheStore, o.PrefixCacheTokens, o.FlashAttention, o.BranchBatchTokens = "kv", 1024, "off", 128
			})},
		{"cpu, host store", Options{PrefixCacheStore: "host"}, cpu},
		{"cpu, recurrent", Options{recurrentModel: true},
			with(cpu, func(o *Options) { o.recurrentModel, o.PrefixCacheStore, o.PrefixCacheTokens = true, "kv", 1024 })},
		{"cpu, recurrent, host store given", Options{recurrentModel: true, PrefixCacheStore: "host"},
			with(cpu, func(o *Options) { o.recurrentModel = true })},
		{"cpu, small context", Options{ContextSize: 600},
			with(cpu, func(o *Options) { o.ContextSize, o.PrefixCacheTokens = 600, 300 })},
		{"cpu, small context, kv store", Options{ContextSize: 600, PrefixCacheStore: "kv"},
			with(cpu, func(o *Options) { o.ContextSize, o.PrefixCacheTokens, o.PrefixCacheStore = 600, 300, "kv" })},
		{"cpu, small batch, flash attention off", Options{BatchSize: 100, UBatchSize: 100, FlashAttention: "off"},
			with(cpu, func(o *Options) {
				o.BatchSize, o.UBatchSize, o.FlashAttention, o.BranchBatchTokens = 100, 100, "off", 100
			})},
		{"cpu, small batch", Options{BatchSize: 200, UBatchSize: 200},
			with(cpu, func(o *Options) { o.BatchSize, o.UBatchSize, o.BranchBatchTokens = 200, 200, 200 })},
		{"cpu, few sequences", Options{MaxSequences: 6},
			with(cpu, func(o *Options) { o.MaxSequences, o.PrefixCacheSlots = 6, 3 })},
		{"cpu, one sequence", Options{MaxSequences: 1},
			with(cpu, func(o *Options) { o.MaxSequences, o.PrefixCacheSlots = 1, 1 })},
		{"gpu, all layers", Options{GPULayers: -1}, gpu},
		{"gpu, some layers", Options{GPULayers: 4}, with(gpu, func(o *Options) { o.GPULayers = 4 })},
		{"gpu, flash attention off", Options{GPULayers: -1, FlashAttention: "off"},
			with(gpu, func(o *Options) { o.FlashAttention, o.BranchBatchTokens, o.HeadBatchTokens = "off", 128, 128 })},
		{"gpu, host store", Options{GPULayers: -1, PrefixCacheStore: "host"},
			with(gpu, func(o *Options) { o.PrefixCacheStore = "host" })},
		{"gpu, recurrent", Options{GPULayers: -1, recurrentModel: true},
			with(gpu, func(o *Options) { o.recurrentModel = true })},
		{"gpu, small context", Options{GPULayers: -1, ContextSize: 600},
			with(gpu, func(o *Options) { o.ContextSize, o.PrefixCacheTokens = 600, 300 })},
		{"gpu, branch budget given", Options{GPULayers: -1, BranchBatchTokens: 64},
			with(gpu, func(o *Options) { o.BranchBatchTokens, o.HeadBatchTokens = 64, 64 })},
		{"gpu, mmap off given", Options{GPULayers: -1, Mmap: "off"}, with(gpu, func(o *Options) { o.Mmap = "off" })},
		{"everything given", Options{
			ModelPath: "m.gguf", SHA256: "abc", GPULayers: 2, Mmap: "off", Threads: 3, ContextSize: 1000,
			BatchSize: 300, UBatchSize: 100, MaxSequences: 20, RecurrentMemory: 5, MaxPending: 7, Temperature: 0.5,
			PrefixCacheSlots: 4, PrefixCacheTokens: 50, PrefixCacheStore: "host", FlashAttention: "off",
			BranchBatchTokens: 90, HeadBatchTokens: 30, NoPrefixCache: true, MaxRoundDecisions: 9,
		}, Options{
			ModelPath: "m.gguf", SHA256: "abc", GPULayers: 2, Mmap: "off", Threads: 3, ContextSize: 1000,
			BatchSize: 300, UBatchSize: 100, MaxSequences: 20, RecurrentMemory: 5, MaxPending: 7, Temperature: 0.5,
			PrefixCacheSlots: 4, PrefixCacheTokens: 50, PrefixCacheStore: "host", FlashAttention: "off",
			BranchBatchTokens: 90, HeadBatchTokens: 30, NoPrefixCache: true, MaxRoundDecisions: 9,
		}},
		{"cpu, everything given but the store", Options{
			Mmap: "on", Threads: 3, ContextSize: 1000, BatchSize: 300, UBatchSize: 100, MaxSequences: 20,
			RecurrentMemory: 5, MaxPending: 7, Temperature: 0.5, PrefixCacheSlots: 4, FlashAttention: "on",
			MaxRoundDecisions: 9,
		}, Options{
			Mmap: "on", Threads: 3, ContextSize: 1000, BatchSize: 300, UBatchSize: 100, MaxSequences: 20,
			RecurrentMemory: 5, MaxPending: 7, Temperature: 0.5, PrefixCacheSlots: 4, PrefixCacheTokens: 500,
			PrefixCacheStore: "host", FlashAttention: "on", BranchBatchTokens: 300, HeadBatchTokens: 1,
			MaxRoundDecisions: 9,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.in.withDefaults())
			require.Equal(t, tc.want, tc.want.withDefaults(), "resolving twice changes nothing")
		})
	}
}
