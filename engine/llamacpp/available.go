//go:build llamacpp

package llamacpp

// Available reports whether this binary embeds llama.cpp.
const Available = true
