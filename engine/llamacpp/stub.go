//go:build !cgo

package llamacpp

import (
	"context"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// Available reports whether this binary embeds llama.cpp.
const Available = false

// Info describes a build without llama.cpp.
func Info() BuildInfo { return BuildInfo{} }

// Engine is unavailable in builds without cgo.
type Engine struct{}

// New always fails with engine.ErrNoEngine in builds without cgo: the
// error says how to build a binary that links llama.cpp.
func New(Options) (*Engine, error) { return nil, engine.ErrNoEngine }

// Score always fails with engine.ErrNoEngine.
func (*Engine) Score(context.Context, []decision.Decision) ([]decision.Result, error) {
	return nil, engine.ErrNoEngine
}

// Identity is empty without llama.cpp.
func (*Engine) Identity() decision.ModelIdentity { return decision.ModelIdentity{} }

// Stats is empty without llama.cpp.
func (*Engine) Stats() Stats { return Stats{} }

// Close does nothing.
func (*Engine) Close() error { return nil }

// Quantize always fails with engine.ErrNoEngine in builds without cgo
// (after checking the type name).
func Quantize(_, _, typ string, _ int) error {
	if _, err := quantType(typ); err != nil {
		return err
	}
	return engine.ErrNoEngine
}

// GlibcHugePagesTunable is false: without llama.cpp, no model is read into
// memory.
func GlibcHugePagesTunable() bool { return false }

func hugeMalloc() bool { return false }
