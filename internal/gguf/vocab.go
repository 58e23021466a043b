package gguf

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Vocab is a real model's tokenizer, read from a GGUF file (typically a
// vocab-only one such as llama.cpp's models/ggml-vocab-qwen35.gguf): every
// tokenizer.* metadata key with its exact GGUF type, so that a synthetic
// model carrying it tokenizes exactly as the real model does.
type Vocab struct {
	// Path is the file it was read from.
	Path string
	// Label names it in a synthetic model's general.name:
	// "qwen35" for ggml-vocab-qwen35.gguf, otherwise the file's base name.
	Label string
	// SHA256 is the hex digest of the file.
	SHA256 string
	// Model is tokenizer.ggml.model ("gpt2", "llama", "gemma4", …).
	Model string
	// Tokens is the vocabulary size (the length of tokenizer.ggml.tokens).
	Tokens int
	// ChatTemplate is tokenizer.chat_template, "" when it has none.
	ChatTemplate string

	keys   []string // tokenizer.* keys, sorted
	values map[string]metaValue
}

// LoadVocab reads the tokenizer of a GGUF file. Every tokenizer.* key is
// kept; it fails when the file has no tokens, or a key whose GGUF type the
// writer cannot reproduce (8- and 16-bit integer arrays, as in T5's
// precompiled_charsmap).
func LoadVocab(path string) (*Vocab, error) {
	m, err := readGGUFMeta(path)
	if err != nil {
		return nil, fmt.Errorf("model: vocab: %w", err)
	}
	v := &Vocab{Path: path, Label: vocabLabel(path), values: map[string]metaValue{}}
	for _, k := range m.Keys {
		if !strings.HasPrefix(k, "tokenizer.") {
			continue
		}
		mv := m.Values[k]
		if !mv.writable() {
			return nil, fmt.Errorf("model: vocab %s: key %s is an %s, which the GGUF writer cannot reproduce", path, k, mv.typeString())
		}
		v.keys = append(v.keys, k)
		v.values[k] = mv
	}
	sort.Strings(v.keys)
	toks, ok := v.values["tokenizer.ggml.tokens"].Value.([]string)
	if !ok || len(toks) == 0 {
		return nil, fmt.Errorf("model: vocab %s: no tokenizer.ggml.tokens string array", path)
	}
	v.Tokens = len(toks)
	if s, ok := v.values["tokenizer.ggml.model"].Value.(string); ok {
		v.Model = s
	} else {
		return nil, fmt.Errorf("model: vocab %s: no tokenizer.ggml.model string", path)
	}
	if s, ok := v.values["tokenizer.chat_template"].Value.(string); ok {
		v.ChatTemplate = s
	}
	sum, err := fileSHA256(path)
	if err != nil {
		return nil, fmt.Errorf("model: vocab: %w", err)
	}
	v.SHA256 = sum
	return v, nil
}

// Keys lists the tokenizer.* keys the vocabulary carries, sorted.
func (v *Vocab) Keys() []string { return append([]string(nil), v.keys...) }

// HasToken reports whether tok is a token of the vocabulary.
func (v *Vocab) HasToken(tok string) bool {
	for _, t := range v.values["tokenizer.ggml.tokens"].Value.([]string) {
		if t == tok {
			return true
		}
	}
	return false
}

// apply replaces kv's tokenizer with the vocabulary's.
func (v *Vocab) apply(kv map[string]any) {
	for k := range kv {
		if strings.HasPrefix(k, "tokenizer.") {
			delete(kv, k)
		}
	}
	for _, k := range v.keys {
		kv[k] = v.values[k].Value
	}
}

// vocabLabel: models/ggml-vocab-qwen35.gguf → "qwen35".
func vocabLabel(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".gguf")
	if l := strings.TrimPrefix(base, "ggml-vocab-"); l != "" {
		return l
	}
	return base
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LlamaSourceDir is where the pinned llama.cpp source tree lives: the
// VERDICT_LLAMA_SRC environment variable, or .verdict/llama/src (the
// source beside the library that make llama-lib links there) under
// the module root found from the working directory upwards. It returns ""
// when neither names an existing directory.
func LlamaSourceDir() string {
	if d := os.Getenv("VERDICT_LLAMA_SRC"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			d := filepath.Join(dir, ".verdict", "llama", "src")
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				return d
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// ResolveVocab turns a --vocab value into a file: an existing path as is,
// or a bare name such as "qwen35" or "llama-bpe" as
// models/ggml-vocab-<name>.gguf in the llama.cpp source tree
// (LlamaSourceDir).
func ResolveVocab(name string) (string, error) {
	if _, err := os.Stat(name); err == nil {
		return name, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("model: vocab: %w", err)
	}
	if strings.ContainsRune(name, os.PathSeparator) || strings.HasSuffix(name, ".gguf") {
		return "", fmt.Errorf("model: vocab: %s does not exist", name)
	}
	src := LlamaSourceDir()
	if src == "" {
		return "", fmt.Errorf("model: vocab: %s is not a file, and no llama.cpp source tree is there to look it up in (make llama-lib fetches the pinned one, or set VERDICT_LLAMA_SRC)", name)
	}
	p := filepath.Join(src, "models", "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("model: vocab: %s is neither a file nor a vocabulary in %s", name, filepath.Join(src, "models"))
	}
	return p, nil
}
