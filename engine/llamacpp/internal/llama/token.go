package llama

// Token is a vocabulary id.
type Token int32
