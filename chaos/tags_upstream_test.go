//go:build chaos && llamacpp && upstream

package chaos

// buildTags are the tags the verdict binary is built with: this test
// binary's llama.cpp route.
const buildTags = "llamacpp,upstream"
