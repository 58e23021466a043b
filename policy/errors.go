package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Errors returned by Parse, Load and Holder.Reload match one
// of them with errors.Is.
var (
	// ErrInvalid: the policy file breaks the schema. The error is a
	// *LoadError that lists every problem with its path.
	ErrInvalid = errors.New("policy: invalid policy")
	// ErrRead: the policy file could not be read.
	ErrRead = errors.New("policy: cannot read policy file")
)

// FieldError is one problem in a policy file, named by its path, for
// example `kinds.support-route.rules[2].option: unknown option "refund"`.
type FieldError struct {
	// Path is the dotted path of the offending field.
	Path string `json:"path"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Line is the 1-based line of the field in the file (0 when unknown).
	Line int `json:"line,omitempty"`
}

func (e FieldError) Error() string {
	s := e.Message
	if e.Path != "" {
		s = e.Path + ": " + e.Message
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

// LoadError lists every problem found in a policy file. It matches
// ErrInvalid.
type LoadError struct {
	// File is the file name when the policy was loaded from a file.
	File string `json:"file,omitempty"`
	// Errors are the problems, in file order.
	Errors []FieldError `json:"errors"`
}

func (e *LoadError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	prefix := "policy: "
	if e.File != "" {
		prefix += e.File + ": "
	}
	return prefix + strings.Join(parts, "; ")
}

// Is makes a *LoadError match ErrInvalid.
func (e *LoadError) Is(target error) bool { return target == ErrInvalid }
