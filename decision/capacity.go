package decision

// The hosted System One service's words for a capacity refusal: the model
// cannot take this request, as against a request that is broken. Its
// clients, the Decision Index kit among them, tell the two apart by these
// phrases in the message (SYSTEM_ONE.md, Limits), so every capacity
// refusal carries one, with the field path and the numbers beside it.
const (
	// PhraseTooFewOptions: a choice with fewer than two options.
	PhraseTooFewOptions = "a choice needs at least two options"
	// PhraseOptionsPerChoice: a choice with more options than allowed.
	PhraseOptionsPerChoice = "options per choice"
	// PhraseScoreLevels: a score with fewer than 2 or more than 10
	// levels.
	PhraseScoreLevels = "a score takes 2 to 10 levels"
	// PhraseContextWindow: a prompt longer than the model's context.
	PhraseContextWindow = "context window"
)
