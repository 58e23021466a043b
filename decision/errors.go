package decision

import (
	"fmt"
	"strings"
)

// Sentinel errors. Each error returned by this package matches exactly one
// of them with errors.Is.
var (
	// ErrMalformed: the body is not the JSON it claims to be (CodeMalformed,
	// HTTP 400).
	ErrMalformed = NewSentinel(CodeMalformed, "decision: malformed JSON")
	// ErrInvalid: valid JSON that breaks a field rule (CodeInvalid, HTTP 422).
	ErrInvalid = NewSentinel(CodeInvalid, "decision: invalid request")
	// ErrTooLarge: a size limit was exceeded (CodeTooLarge, HTTP 413).
	ErrTooLarge = NewSentinel(CodeTooLarge, "decision: request too large")
)

// FieldError is one problem with one field, named by its JSON path, for
// example `options[3].id: duplicate "billing"`.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// ValidationError lists every field problem found in a request. It matches
// ErrInvalid, or ErrTooLarge when any of its problems is a size limit.
type ValidationError struct {
	Errors   []FieldError `json:"errors"`
	tooLarge bool
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return strings.Join(parts, "; ")
}

// ErrorCode is CodeTooLarge when any problem is a size limit, else
// CodeInvalid.
func (e *ValidationError) ErrorCode() Code {
	if e.tooLarge {
		return CodeTooLarge
	}
	return CodeInvalid
}

// Is reports the class of the error for errors.Is.
func (e *ValidationError) Is(target error) bool {
	if target == ErrTooLarge {
		return e.tooLarge
	}
	return target == ErrInvalid && !e.tooLarge
}

// fieldErrs accumulates field errors while a request is checked.
type fieldErrs struct {
	list     []FieldError
	tooLarge bool
	// quiet drops problems at a path related to (equal to, inside or
	// containing) one already recorded at list[quietFrom:].
	quiet     bool
	quietFrom int
}

func (f *fieldErrs) add(path, format string, args ...any) {
	f.addClass(false, path, format, args...)
}

func (f *fieldErrs) addLarge(path, format string, args ...any) {
	f.addClass(true, path, format, args...)
}

func (f *fieldErrs) addClass(large bool, path, format string, args ...any) {
	if f.quiet {
		for _, fe := range f.list[f.quietFrom:] {
			if relatedPath(fe.Path, path) {
				return
			}
		}
	}
	f.tooLarge = f.tooLarge || large
	f.list = append(f.list, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// relatedPath reports whether one path equals the other or lies inside it.
func relatedPath(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a+".") || strings.HasPrefix(b, a+"[")
}

func (f *fieldErrs) err() error {
	if len(f.list) == 0 {
		return nil
	}
	return &ValidationError{Errors: f.list, tooLarge: f.tooLarge}
}

// malformed wraps a JSON syntax problem at path.
func malformed(path string, err error) error {
	if path == "" {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrMalformed, path, err)
}

// join builds a JSON path: join("options", 3, "id") = "options[3].id".
func join(base string, elems ...any) string {
	var b strings.Builder
	b.WriteString(base)
	for _, e := range elems {
		switch v := e.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}
