package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/gguf"
)

func init() {
	register(command{name: "model", summary: "synthesize, inspect or pin GGUF model files", runFunc: runModel})
}

const modelUsage = `Usage:
  verdict model synth [--arch llama|qwen35] [--shape tiny|medium|small] [--seed N]
                      [--vocab FILE.gguf|NAME] [--chat chatml|llama3] -o FILE
  verdict model inspect [--json] [--no-hash] FILE
  verdict model pin FILE      write FILE.sha256, which loading then enforces
  verdict model quantize --type Q8_0|Q4_K_M [--threads N] [--force] IN -o OUT
                              write IN's weights quantized (llama.cpp's quantizer)
`

func runModel(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(helpOut, modelUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "synth":
		return runModelSynth(args[1:])
	case "inspect":
		return runModelInspect(args[1:])
	case "pin":
		return runModelPin(args[1:])
	case "quantize":
		return runModelQuantize(args[1:])
	}
	fmt.Fprintf(os.Stderr, "verdict model: unknown subcommand %q\n\n%s", args[0], modelUsage)
	return errUsage
}

func runModelSynth(args []string) error {
	fs := newFlagSet("model synth", "model synth [flags] -o FILE")
	arch := fs.String("arch", gguf.ArchLlama, "architecture: "+strings.Join(gguf.ArchNames(), ", "))
	shape := fs.String("shape", "tiny", "model shape: llama "+strings.Join(gguf.ShapeNamesFor(gguf.ArchLlama), ", ")+"; qwen35 "+strings.Join(gguf.ShapeNamesFor(gguf.ArchQwen35), ", "))
	seed := fs.Uint64("seed", 1, "random seed; the same seed writes the same bytes")
	chat := fs.String("chat", "", "embed a chat template: chatml or llama3 (default none; with --vocab only when the vocabulary has none)")
	vocab := fs.String("vocab", "", "carry the tokenizer of this GGUF (e.g. llama.cpp's models/ggml-vocab-qwen35.gguf, or just qwen35 to find it in $VERDICT_LLAMA_SRC or the pinned source that make llama-lib fetches)")
	out := fs.String("o", "", "output file (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("flag -o: an output file is required")
	}
	shapes := gguf.ShapeNamesFor(*arch)
	if shapes == nil {
		return fmt.Errorf("flag --arch: bad value %q (want %s)", *arch, strings.Join(gguf.ArchNames(), ", "))
	}
	if !slices.Contains(shapes, *shape) {
		return fmt.Errorf("flag --shape: bad value %q for --arch %s (want %s)", *shape, *arch, strings.Join(shapes, ", "))
	}
	vocabPath := ""
	if *vocab != "" {
		p, err := gguf.ResolveVocab(*vocab)
		if err != nil {
			return fmt.Errorf("flag --vocab: %w", err)
		}
		vocabPath = p
	}
	if err := gguf.Synth(*out, gguf.SynthOptions{Arch: *arch, Shape: *shape, Seed: *seed, Chat: *chat, Vocab: vocabPath}); err != nil {
		return err
	}
	info, err := gguf.Inspect(*out, true)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s (%s), %d parameters, %s, vocab %d, sha256 %s\n", *out, info.Name, info.Architecture, info.Parameters, info.Quantization, info.VocabSize, info.SHA256)
	return nil
}

func runModelInspect(args []string) error {
	fs := newFlagSet("model inspect", "model inspect [flags] FILE")
	asJSON := fs.Bool("json", false, "print JSON")
	noHash := fs.Bool("no-hash", false, "skip the sha256 (which reads the whole file)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("model inspect: want exactly one FILE, got %d arguments", fs.NArg())
	}
	info, err := gguf.Inspect(fs.Arg(0), !*noHash)
	if err != nil {
		return err
	}
	notLoaded := "" // why this build does not load the file
	if err := llamacpp.CheckArchitecture(info.Architecture); err != nil {
		notLoaded = err.Error()
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*gguf.Info
			Loads     bool   `json:"loads"`
			LlamaCpp  string `json:"llama_cpp"`
			NotLoaded string `json:"not_loaded,omitempty"`
		}{info, notLoaded == "", llamacpp.LlamaCppVersion, notLoaded})
	}
	defer func() {
		loads := "yes, with " + llamacpp.LlamaCppVersion
		if notLoaded != "" {
			loads = "no: " + notLoaded
		}
		fmt.Printf("loads         %s\n", loads)
	}()
	tmpl := "no"
	if info.ChatTemplate {
		tmpl = "yes"
	}
	fmt.Printf("file          %s\nname          %s\narchitecture  %s\nparameters    %d (%.3g B)\nquantization  %s\nvocabulary    %d tokens\ncontext       %d\nchat template %s\nsize          %d bytes\n",
		info.File, info.Name, info.Architecture, info.Parameters, float64(info.Parameters)/1e9, info.Quantization, info.VocabSize, info.ContextLen, tmpl, info.SizeBytes)
	if info.SHA256 != "" {
		fmt.Printf("sha256        %s\n", info.SHA256)
	}
	return nil
}

func runModelPin(args []string) error {
	fs := newFlagSet("model pin", "model pin FILE")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("model pin: want exactly one FILE, got %d arguments", fs.NArg())
	}
	info, err := gguf.Inspect(fs.Arg(0), true)
	if err != nil {
		return err
	}
	if err := gguf.WriteManifest(fs.Arg(0), info.SHA256); err != nil {
		return err
	}
	fmt.Printf("pinned %s to sha256 %s in %s\n", fs.Arg(0), info.SHA256, gguf.ManifestPath(fs.Arg(0)))
	return nil
}

func runModelQuantize(args []string) error {
	fs := newFlagSet("model quantize", "model quantize --type TYPE IN.gguf -o OUT.gguf")
	typ := fs.String("type", "", "weight type: "+strings.Join(llamacpp.QuantTypeNames(), " or ")+" (required)")
	threads := fs.Int("threads", 0, "quantizer threads (default: number of physical cores)")
	out := fs.String("o", "", "output file (required; written under a temporary name, then renamed)")
	force := fs.Bool("force", false, "replace OUT if it exists")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return fmt.Errorf("model quantize: want exactly one input FILE, got %d arguments", len(pos))
	case *typ == "":
		return fmt.Errorf("flag --type: required (%s)", strings.Join(llamacpp.QuantTypeNames(), " or "))
	case *out == "":
		return fmt.Errorf("flag -o: an output file is required")
	case *threads < 0:
		return fmt.Errorf("flag --threads: must be >= 0, got %d", *threads)
	}
	in := pos[0]
	before, err := gguf.Inspect(in, false)
	if err != nil {
		return err
	}
	if same, _ := sameFile(in, *out); same {
		return fmt.Errorf("flag -o: %s is the input file", *out)
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("flag -o: %s exists (pass --force to replace it)", *out)
	}
	after, err := quantizeTo(in, *out, *typ, *threads)
	if err != nil {
		if strings.Contains(err.Error(), "unknown quantization type") {
			return fmt.Errorf("flag --type: %w", err)
		}
		return err
	}
	fmt.Printf("quantized %s (%s, %.1f MB) to %s (%s, %.1f MB)\n", in, before.Quantization, float64(before.SizeBytes)/1e6, *out, after.Quantization, float64(after.SizeBytes)/1e6)
	return nil
}

// sameFile reports whether two paths name one existing file.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

// quantizedCopy returns path quantized to typ, cached under
// dataDir/models as <name>-<typ>.gguf (made on first use).
func quantizedCopy(path, typ, dataDir string) (string, error) {
	base := strings.TrimSuffix(filepath.Base(path), ".gguf")
	out := filepath.Join(dataDir, "models", base+"-"+typ+".gguf")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	if _, err := quantizeTo(path, out, typ, 0); err != nil {
		return "", err
	}
	return out, nil
}

// quantizeTo writes in quantized to typ at out: under a temporary name
// first, read back, then renamed, so a failed run leaves no model behind.
func quantizeTo(in, out, typ string, threads int) (*gguf.Info, error) {
	tmp := out + ".partial"
	defer os.Remove(tmp)
	if err := llamacpp.Quantize(in, tmp, typ, threads); err != nil {
		return nil, err
	}
	info, err := gguf.Inspect(tmp, false)
	if err != nil {
		return nil, fmt.Errorf("the quantized file does not read back: %w", err)
	}
	return info, os.Rename(tmp, out)
}
