package calibrate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
)

// Format names the calibration file format.
const Format = "verdict-calibration/1"

// ErrMismatch: the calibration file is pinned to another model or prompt
// version than the one loaded.
var ErrMismatch = errors.New("calibrate: calibration file does not match the model")

// File is a calibration file: a temperature fitted on labeled results of
// one model (by sha256) and one prompt version.
type File struct {
	Format string `json:"format"`
	// Method is "temperature".
	Method string `json:"method"`
	// ModelSHA256 and PromptVersion pin the file: it is refused for any
	// other model or prompt.
	ModelSHA256   string `json:"model_sha256"`
	PromptVersion string `json:"prompt_version"`
	// ModelFile is informative.
	ModelFile string `json:"model_file,omitempty"`
	// Temperature divides the option logits before the softmax.
	Temperature float64 `json:"temperature"`
	// Debias is the option-order rotations the fitted results used (0 = none).
	Debias int `json:"debias,omitempty"`
	// Samples is the number of labeled decisions of the fit.
	Samples int `json:"samples"`
	// CrossValidation is the k-fold check of the fit.
	CrossValidation CrossValidation `json:"cross_validation"`
	// Thresholds are the suggested min_probability values.
	Thresholds []Threshold `json:"thresholds,omitempty"`
}

// Loaded is a calibration file read from disk.
type Loaded struct {
	File
	// Path it was read from and SHA256 (hex) of its bytes.
	Path, SHA256 string
}

// Load reads and checks a calibration file.
func Load(path string) (*Loaded, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("calibration %s: %w", path, err)
	}
	switch {
	case f.Format != Format:
		return nil, fmt.Errorf("calibration %s: format: want %q, got %q", path, Format, f.Format)
	case f.Method != "temperature":
		return nil, fmt.Errorf("calibration %s: method: want \"temperature\", got %q", path, f.Method)
	case len(f.ModelSHA256) != 64:
		return nil, fmt.Errorf("calibration %s: model_sha256: want 64 hex digits, got %q", path, f.ModelSHA256)
	case f.PromptVersion == "":
		return nil, fmt.Errorf("calibration %s: prompt_version: missing", path)
	case !(f.Temperature >= MinTemperature && f.Temperature <= MaxTemperature) || math.IsNaN(f.Temperature):
		return nil, fmt.Errorf("calibration %s: temperature: must be in [%v, %v], got %v", path, MinTemperature, MaxTemperature, f.Temperature)
	}
	sum := sha256.Sum256(b)
	return &Loaded{File: f, Path: path, SHA256: hex.EncodeToString(sum[:])}, nil
}

// Check refuses a file pinned to another model or prompt version. An empty
// argument is not checked (a remote engine whose identity is unknown until
// its first result).
func (l *Loaded) Check(modelSHA256, promptVersion string) error {
	if modelSHA256 != "" && modelSHA256 != l.ModelSHA256 {
		return fmt.Errorf("%w: %s is pinned to model sha256 %s, the loaded model is %s", ErrMismatch, l.Path, short(l.ModelSHA256), short(modelSHA256))
	}
	if promptVersion != "" && promptVersion != l.PromptVersion {
		return fmt.Errorf("%w: %s is pinned to prompt %s, the model is prompted with %s", ErrMismatch, l.Path, l.PromptVersion, promptVersion)
	}
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// Write writes f as indented JSON.
func (f *File) Write(path string) error {
	f.Format, f.Method = Format, "temperature"
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
