package gguf

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrMismatch: a model file's sha256 is not the pinned one.
var ErrMismatch = errors.New("model: sha256 mismatch")

// Info describes a GGUF file.
type Info struct {
	File         string `json:"file"`
	Path         string `json:"path"`
	Name         string `json:"name,omitempty"`
	Architecture string `json:"architecture"`
	Parameters   uint64 `json:"parameters"`
	Quantization string `json:"quantization"`
	VocabSize    int    `json:"vocab_size"`
	ContextLen   uint64 `json:"context_length,omitempty"`
	ChatTemplate bool   `json:"chat_template"`
	SizeBytes    int64  `json:"size_bytes"`
	SHA256       string `json:"sha256,omitempty"`
}

// Inspect reads a GGUF file's header. With hash it also computes the
// file's sha256 (which reads the whole file).
func Inspect(path string, hash bool) (*Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	g, err := decodeGGUF(f, st.Size(), true)
	if err != nil {
		return nil, fmt.Errorf("model: %s is not a readable GGUF file: %w", path, err)
	}
	arch, ok := g.Values["general.architecture"].Value.(string)
	if !ok {
		arch = "unknown"
	}
	ctx, _ := g.uintValue(arch + ".context_length")
	info := &Info{
		File: filepath.Base(path), Path: path, SizeBytes: st.Size(),
		Name:         g.stringValue("general.name"),
		Architecture: arch,
		VocabSize:    len(g.stringsValue("tokenizer.ggml.tokens")),
		ContextLen:   ctx,
		ChatTemplate: g.stringValue("tokenizer.chat_template") != "",
	}
	counts := map[string]uint64{}
	for _, t := range g.Tensors {
		n := t.Elements()
		info.Parameters += n
		counts[t.Type.String()] += n
	}
	info.Quantization = quantization(&g.ggufMeta, counts)
	if hash {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return nil, fmt.Errorf("model: hash %s: %w", path, err)
		}
		info.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return info, nil
}

// quantization names the file type: general.file_type when present,
// otherwise the tensor type holding most parameters.
func quantization(m *ggufMeta, counts map[string]uint64) string {
	if ft, ok := m.uintValue("general.file_type"); ok {
		if s := fileTypeName(ft); s != "" {
			return s
		}
	}
	best, bestN := "unknown", uint64(0)
	for k, n := range counts {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best
}

// ManifestPath is where the sha256 pin of a model lives: <model>.sha256.
func ManifestPath(modelPath string) string { return modelPath + ".sha256" }

// ReadManifest returns the pinned sha256 of a model, or "" when it has no
// manifest. The manifest holds the hex digest, optionally followed by
// whitespace and the file name (the sha256sum format).
func ReadManifest(modelPath string) (string, error) {
	b, err := os.ReadFile(ManifestPath(modelPath))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("model: manifest: %w", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 || len(fields[0]) != 64 {
		return "", fmt.Errorf("model: manifest %s: want a 64-digit hex sha256", ManifestPath(modelPath))
	}
	if _, err := hex.DecodeString(fields[0]); err != nil {
		return "", fmt.Errorf("model: manifest %s: %v", ManifestPath(modelPath), err)
	}
	return strings.ToLower(fields[0]), nil
}

// WriteManifest pins a model by writing <model>.sha256.
func WriteManifest(modelPath, sum string) error {
	line := sum + "  " + filepath.Base(modelPath) + "\n"
	return os.WriteFile(ManifestPath(modelPath), []byte(line), 0o644)
}

// Verify checks a model against a pin: want, or the manifest when want is
// empty. It returns the file's Info with its sha256. No pin means no check.
func Verify(path, want string) (*Info, error) {
	if want == "" {
		m, err := ReadManifest(path)
		if err != nil {
			return nil, err
		}
		want = m
	}
	info, err := Inspect(path, true)
	if err != nil {
		return nil, err
	}
	if want != "" && !strings.EqualFold(want, info.SHA256) {
		return nil, fmt.Errorf("%w: %s has %s, pinned %s", ErrMismatch, path, info.SHA256, want)
	}
	return info, nil
}
