package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/decision"
)

// PromptVersion names the wording below. Any change to a word of the
// template, the option layout or the answer cue is a new version; the
// chat family is appended ("verdict-v1/chatml").
const PromptVersion = "verdict-v1"

// PromptVersionOf is the prompt_version of prompts rendered for family.
func PromptVersionOf(family ChatFamily) string { return PromptVersion + "/" + string(family) }

// ChatFamily is a chat-template family verdict can wrap prompts in.
type ChatFamily string

// Recognised chat families.
const (
	ChatPlain  ChatFamily = "plain"
	ChatChatML ChatFamily = "chatml"
	ChatLlama3 ChatFamily = "llama3"
	ChatGemma  ChatFamily = "gemma"
	// ChatGemma4 is Gemma 4's turn format (<|turn>user … <turn|>), with
	// the empty thought channel its template emits when thinking is off.
	ChatGemma4 ChatFamily = "gemma4"
	// ChatPhi3 is Phi-3's <|user|> … <|end|> <|assistant|> format.
	ChatPhi3 ChatFamily = "phi3"
)

// DetectChat recognises a chat template by its markers. An empty or
// unrecognised template gives ChatPlain.
func DetectChat(tmpl string) ChatFamily {
	switch {
	case strings.Contains(tmpl, "<|im_start|>"):
		return ChatChatML
	case strings.Contains(tmpl, "<|start_header_id|>"):
		return ChatLlama3
	case strings.Contains(tmpl, "<start_of_turn>"):
		return ChatGemma
	case strings.Contains(tmpl, "<|turn>") && strings.Contains(tmpl, "<turn|>"):
		return ChatGemma4
	case strings.Contains(tmpl, "<|user|>") && strings.Contains(tmpl, "<|assistant|>") && strings.Contains(tmpl, "<|end|>"):
		return ChatPhi3
	}
	return ChatPlain
}

// ChatSpecials lists the control-token strings a family's wrapper uses;
// a runtime checks that each is one control token of its vocabulary
// before using the family.
func ChatSpecials(f ChatFamily) []string {
	switch f {
	case ChatChatML:
		return []string{"<|im_start|>", "<|im_end|>"}
	case ChatLlama3:
		return []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
	case ChatGemma:
		return []string{"<start_of_turn>", "<end_of_turn>"}
	case ChatGemma4:
		return []string{"<|turn>", "<turn|>", "<|channel>", "<channel|>"}
	case ChatPhi3:
		return []string{"<|user|>", "<|end|>", "<|assistant|>"}
	}
	return nil
}

// Segment is a piece of a prompt. Special segments are template control
// tokens and are tokenized with special-token parsing; all other text,
// including everything the caller supplied, is tokenized as plain text, so
// a state that contains "<|im_start|>" cannot open a turn.
type Segment struct {
	Text    string
	Special bool
}

// Prompt is a rendered decision.
type Prompt struct {
	// Segments concatenate to the prompt text.
	Segments []Segment
	// StateEnd is the byte offset in the text where the state block ends:
	// everything before it depends only on the state (and template), so
	// decisions about the same state share it.
	StateEnd int
	// Version is PromptVersion plus the chat family.
	Version string
	// Labels are the answer-slot labels, one per option.
	Labels []string
	// BareLabel is true when the answer slot follows the prompt with no
	// space (chat turns); false when it follows "Answer:" after a space.
	BareLabel bool
}

// Text is the whole prompt.
func (p *Prompt) Text() string {
	var b strings.Builder
	for _, s := range p.Segments {
		b.WriteString(s.Text)
	}
	return b.String()
}

// SHA256 is the hex sha256 of the prompt text.
func (p *Prompt) SHA256() string {
	h := sha256.Sum256([]byte(p.Text()))
	return hex.EncodeToString(h[:])
}

// Labels returns n answer labels: "A".."Z" for up to 26 options, else
// "1".."n".
func Labels(n int) []string {
	out := make([]string, n)
	for i := range out {
		if n <= 26 {
			out[i] = string(rune('A' + i))
		} else {
			out[i] = strconv.Itoa(i + 1)
		}
	}
	return out
}

// Render builds the prompt of a decision: instructions, the state, the
// question, the lettered options and the answer cue, in that order, so the
// reusable prefix ends right after the state. With a chat family the text
// becomes the user turn and the assistant turn is opened, empty.
func Render(d *decision.Decision, family ChatFamily) Prompt {
	labels := Labels(len(d.Options))
	var head, tail strings.Builder
	head.WriteString("Read the state below, then answer the question by choosing exactly one of the labelled options.\n\n")
	head.WriteString("State:\n")
	head.WriteString(d.State.Render())
	head.WriteString("\n\n")
	tail.WriteString("Question: ")
	tail.WriteString(d.Question)
	tail.WriteString("\n\nOptions:\n")
	for i, o := range d.Options {
		tail.WriteString(labels[i])
		tail.WriteString(". ")
		tail.WriteString(o.ID)
		if desc := strings.TrimSpace(o.Description); desc != "" && desc != o.ID {
			tail.WriteString(": ")
			tail.WriteString(desc)
		}
		tail.WriteByte('\n')
	}
	tail.WriteString("\nReply with the label of the single best option.")

	p := Prompt{Version: PromptVersionOf(family), Labels: labels}
	plain := func(s string) Segment { return Segment{Text: s} }
	special := func(s string) Segment { return Segment{Text: s, Special: true} }
	switch family {
	case ChatChatML:
		p.Segments = []Segment{special("<|im_start|>"), plain("user\n" + head.String()),
			plain(tail.String()), special("<|im_end|>"), plain("\n"), special("<|im_start|>"), plain("assistant\n")}
		p.BareLabel = true
	case ChatLlama3:
		p.Segments = []Segment{special("<|start_header_id|>"), plain("user"), special("<|end_header_id|>"),
			plain("\n\n" + head.String()), plain(tail.String()), special("<|eot_id|>"),
			special("<|start_header_id|>"), plain("assistant"), special("<|end_header_id|>"), plain("\n\n")}
		p.BareLabel = true
	case ChatGemma:
		p.Segments = []Segment{special("<start_of_turn>"), plain("user\n" + head.String()),
			plain(tail.String()), special("<end_of_turn>"), plain("\n"), special("<start_of_turn>"), plain("model\n")}
		p.BareLabel = true
	case ChatGemma4:
		p.Segments = []Segment{special("<|turn>"), plain("user\n" + head.String()),
			plain(tail.String()), special("<turn|>"), plain("\n"), special("<|turn>"), plain("model\n"),
			special("<|channel>"), plain("thought\n"), special("<channel|>")}
		p.BareLabel = true
	case ChatPhi3:
		p.Segments = []Segment{special("<|user|>"), plain("\n" + head.String()),
			plain(tail.String()), special("<|end|>"), plain("\n"), special("<|assistant|>"), plain("\n")}
		p.BareLabel = true
	default:
		p.Version = PromptVersionOf(ChatPlain)
		p.Segments = []Segment{plain(head.String()), plain(tail.String() + "\nAnswer:")}
	}
	// The state block ends with the segment that holds head.
	for _, s := range p.Segments {
		p.StateEnd += len(s.Text)
		if strings.HasSuffix(s.Text, head.String()) && !s.Special {
			break
		}
	}
	return p
}
