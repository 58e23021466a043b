package llama

// The llama.cpp release this source links: the tag and tree of
// scripts/llama.cpp/pin, which TestPinMatchesTheScriptsPin keeps equal. A
// change of pin changes this file, so Go's build cache rebuilds the
// binding against the new headers.
const (
	PinTag  = "v0.5.0"
	PinTree = "fd570ef54b10ec5fecb739e7e04c8ce44a6f415a"
)
