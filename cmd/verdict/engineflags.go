package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/calibrate"
	"github.com/verdict-dev/verdict/internal/tune"
)

// engineFlags are the model and engine flags shared by every command that
// loads a model (score, batch, eval, bench, worker, serve, up).
type engineFlags struct {
	model       string
	modelDir    string
	sha256      string
	threads     int
	gpuLayers   int
	ctx         int
	batch       int
	ubatch      int
	seqMax      int
	maxPending  int
	temperature float64
	mmap        string
	flashAttn   string
	branchBatch int
	cacheTokens int
	cacheStore  string
	recurrentMB int
	calibration string
	debias      int
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.model, "model", "", "GGUF model file (default: the first .gguf under --model-dir, if any)")
	fs.StringVar(&e.modelDir, "model-dir", sageMakerModelDir, "folder searched for a .gguf when --model is not given (SageMaker puts the model here)")
	fs.StringVar(&e.model, "m", "", "shorthand for --model")
	fs.StringVar(&e.sha256, "model-sha256", "", "refuse to load a model whose sha256 differs (default: <model>.sha256 manifest if present)")
	fs.IntVar(&e.threads, "threads", 0, "decode threads (default: number of physical cores)")
	fs.IntVar(&e.gpuLayers, "gpu-layers", -1, "layers to offload to a GPU: -1 = all when a GPU backend and device are present, 0 = CPU only, N = the first N (the result's model.backend names the device used)")
	fs.IntVar(&e.ctx, "ctx", 0, "context size in tokens (default 8192)")
	fs.IntVar(&e.batch, "batch", 0, "tokens per llama_decode call (default 2048)")
	fs.IntVar(&e.ubatch, "ubatch", 0, "physical micro-batch (default 512)")
	fs.IntVar(&e.seqMax, "seq-max", 0, "KV sequences (branches) at once, 3..256 (default 128; for hybrid/recurrent models sized by --recurrent-memory-mib)")
	fs.IntVar(&e.recurrentMB, "recurrent-memory-mib", 0, "hybrid/recurrent models (qwen35, …): MiB for all sequences' recurrent states, which sizes --seq-max when it is not given (default 1024)")
	fs.IntVar(&e.maxPending, "max-pending", 0, "decisions waiting for the engine before it answers busy (default 1024)")
	fs.Float64Var(&e.temperature, "temperature", 0, "divide option logits by this before the softmax; a calibration file or the policy kind's own temperature wins over it, it wins over the policy file's top-level one (default 1)")
	fs.StringVar(&e.calibration, "calibration", "", "calibration file from `verdict calibrate` (refused unless pinned to this model and prompt); its temperature wins over the policy's and --temperature")
	fs.IntVar(&e.debias, "debias", 0, "score each decision under this many cyclic option orders and average (0 or 1 = off; a request's debias or the policy kind's wins)")
	fs.StringVar(&e.mmap, "mmap", "auto", "map the model file (on) or read it into memory (off); auto: off on the CPU when large allocations get transparent huge pages (as verdict arranges on Linux unless VERDICT_HUGEPAGES=off), where decodes read the weights ~10% faster, else on")
	// --no-mmap was the flag before --mmap; kept so that scripts written
	// for it still run, as exactly --mmap off at its place on the line.
	fs.BoolFunc("no-mmap", "deprecated: the same as --mmap off", func(v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		if on {
			slog.Warn("--no-mmap is deprecated: use --mmap off")
			e.mmap = "off"
		}
		return nil
	})
	fs.StringVar(&e.flashAttn, "flash-attn", "auto", "flash attention: auto, on or off")
	fs.IntVar(&e.branchBatch, "branch-batch", 0, "question-suffix tokens decoded together in one call (default: --batch with flash attention, else 128)")
	fs.IntVar(&e.cacheTokens, "prefix-cache-tokens", 0, "tokens of recent state prefixes kept for reuse (default: ctx/2; 1024 on the CPU with --prefix-cache-store kv, where every decode scans the cells they hold)")
	fs.StringVar(&e.cacheStore, "prefix-cache-store", "auto", "where cached state prefixes wait between uses: kv (resident in the KV cache), host (saved to memory and restored on a hit, so no decode attends over cells it does not need; not for hybrid/recurrent models) or auto (host on the CPU for models without recurrent layers, else kv)")
}

// modelPath returns the model to load: --model, else the first .gguf
// under --model-dir (SageMaker puts models in /opt/ml/model) when the
// command searches one (dir != "").
func (e *engineFlags) modelPath(dir string) (string, error) {
	if e.model != "" {
		return e.model, nil
	}
	if dir == "" {
		return "", errors.New("flag --model: required")
	}
	if e.modelDir != "" {
		dir = e.modelDir
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	sort.Strings(matches)
	if len(matches) == 0 {
		return "", fmt.Errorf("flag --model: no model given and no .gguf file under %s", dir)
	}
	return matches[0], nil
}

// gpuLayersFor resolves --gpu-layers against the devices this build
// found: offloading with no GPU device is running on the CPU, and saying
// so keeps flash attention's "auto" truthful (its GPU choice applies only
// when layers really go to a GPU). An
// explicit request that cannot be met is logged; the result's
// model.backend names the CPU.
func gpuLayersFor(layers int, devs []llamacpp.Device) int {
	if layers == 0 || layers < -1 {
		return layers // 0, or a bad value for the engine's check to name
	}
	for _, d := range devs {
		if d.Kind == "gpu" {
			return layers
		}
	}
	if layers > 0 {
		slog.Warn("--gpu-layers asks for offload but this build found no GPU device; running on the CPU", "gpu_layers", layers)
	}
	return 0
}

// options turns the flags into engine options.
func (e *engineFlags) options(path string) llamacpp.Options {
	return llamacpp.Options{
		ModelPath: path, SHA256: e.sha256, GPULayers: gpuLayersFor(e.gpuLayers, llamacpp.Info().Devices), Mmap: e.mmap,
		Threads: e.threads, ContextSize: e.ctx, BatchSize: e.batch, UBatchSize: e.ubatch,
		MaxSequences: e.seqMax, MaxPending: e.maxPending, Temperature: 1, FlashAttention: e.flashAttn, BranchBatchTokens: e.branchBatch,
		PrefixCacheTokens: e.cacheTokens, PrefixCacheStore: e.cacheStore, RecurrentMemory: int64(e.recurrentMB) << 20,
	}
}

// tuneConfig checks the temperature and debias flags and loads the
// calibration file, refusing one pinned to another model or prompt
// (modelSHA256 or promptVersion empty: not known yet, checked on every
// result instead).
func (e *engineFlags) tuneConfig(modelSHA256, promptVersion string) (tune.Config, error) {
	cfg := tune.Config{Temperature: e.temperature, Debias: e.debias}
	if e.temperature < 0 || math.IsNaN(e.temperature) || math.IsInf(e.temperature, 0) {
		return cfg, fmt.Errorf("flag --temperature: must be > 0, got %v", e.temperature)
	}
	if e.debias < 0 || e.debias > 255 {
		return cfg, fmt.Errorf("flag --debias: must be 0..255, got %d", e.debias)
	}
	if e.calibration == "" {
		return cfg, nil
	}
	cal, err := calibrate.Load(e.calibration)
	if err != nil {
		return cfg, fmt.Errorf("flag --calibration: %w", err)
	}
	if err := cal.Check(modelSHA256, promptVersion); err != nil {
		return cfg, fmt.Errorf("flag --calibration: %w", err)
	}
	if e.temperature > 0 {
		slog.Warn("--temperature is overridden by the calibration file's temperature", "temperature", e.temperature, "calibration", cal.Temperature)
	}
	cfg.Calibration = cal
	return cfg, nil
}

// tuned wraps a loaded engine with the temperature precedence, the
// calibration file and debiasing: every command scores through it.
func (e *engineFlags) tuned(eng *llamacpp.Engine) (*tune.Scorer, error) {
	id := eng.Identity()
	pv := ""
	if id.ChatTemplate != "" {
		pv = engine.PromptVersionOf(engine.ChatFamily(id.ChatTemplate))
	}
	cfg, err := e.tuneConfig(id.SHA256, pv)
	if err != nil {
		return nil, err
	}
	return tune.New(eng, cfg), nil
}

// openTuned loads the engine and wraps it in the flags' temperature,
// calibration and debias settings: the scorer of the offline commands.
// The caller closes the engine.
func (e *engineFlags) openTuned(defaultDir string) (*llamacpp.Engine, *tune.Scorer, error) {
	eng, err := e.open(defaultDir)
	if err != nil {
		return nil, nil, err
	}
	sc, err := e.tuned(eng)
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	return eng, sc, nil
}

// open loads the engine. defaultDir is searched when --model is not given.
func (e *engineFlags) open(defaultDir string) (*llamacpp.Engine, error) {
	path, err := e.modelPath(defaultDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("flag --model: %v", err)
	}
	eng, err := llamacpp.New(e.options(path))
	return eng, engineFlagError(err)
}

// optionFlags names the flag that sets each engine option, for errors.
var optionFlags = map[string]string{
	"ModelPath": "model", "Threads": "threads", "ContextSize": "ctx", "BatchSize": "batch", "UBatchSize": "ubatch",
	"MaxSequences": "seq-max", "MaxPending": "max-pending", "FlashAttention": "flash-attn", "Mmap": "mmap", "BranchBatchTokens": "branch-batch",
	"PrefixCacheTokens": "prefix-cache-tokens", "PrefixCacheStore": "prefix-cache-store", "GPULayers": "gpu-layers",
	"Temperature": "temperature", "RecurrentMemory": "recurrent-memory-mib",
}

// engineFlagError turns the engine's refusal of an option into an error
// naming the flag that set it (options with no flag keep their name).
func engineFlagError(err error) error { return flagError(err, optionFlags) }
