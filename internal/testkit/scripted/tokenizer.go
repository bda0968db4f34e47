package scripted

import (
	"fmt"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/spectok"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
)

// Tokenizer is a backend.Tokenizer over a testmodel.Vocab, written in Go as
// llama.cpp's SPM tokenizer treats these vocabularies: a text is split at
// its control tokens (with parseSpecial), each text between them is
// tokenized by testmodel.Vocab.Tokenize (a space prefix, "▁" for spaces,
// SPM merges, byte fallback), and a token's piece is its text with "▁" read
// as a space, a byte token's byte, or a control token's text (only when
// special). It is a backend.ChatTemplater (llama.cpp's built-in "chatml")
// and a backend.ChatTokenizer, and is safe for concurrent use.
type Tokenizer struct {
	Vocab    *testmodel.Vocab
	specials *spectok.Set
	eog      []int32
	maxPiece int // bytes of the longest normal piece
}

// NewTokenizer returns the tokenizer of v. Its end-of-generation tokens are
// </s> and, when v has it, <|im_end|> (which llama.cpp takes as the EOT
// token of a ChatML vocabulary).
func NewTokenizer(v *testmodel.Vocab) *Tokenizer {
	t := &Tokenizer{Vocab: v, eog: []int32{testmodel.EOS}}
	var toks []spectok.Token
	for id, typ := range v.Types {
		switch typ {
		case testmodel.TokenControl, testmodel.TokenUnknown:
			toks = append(toks, spectok.Token{ID: int32(id), Text: v.Tokens[id], Control: true})
		case testmodel.TokenNormal:
			t.maxPiece = max(t.maxPiece, len(v.Tokens[id]))
		}
	}
	t.specials = spectok.NewSet(toks)
	if id, ok := v.ID(testmodel.ImEnd); ok {
		t.eog = append(t.eog, id)
	}
	return t
}

// Tokenize implements backend.Tokenizer.
func (t *Tokenizer) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return t.tokenizeSpans([]spectok.Span{{Text: text, Special: parseSpecial}}, addSpecial), nil
}

func (t *Tokenizer) tokenizeSpans(spans []spectok.Span, addSpecial bool) []int32 {
	out := []int32{}
	if addSpecial && t.Vocab.AddBOS {
		out = append(out, testmodel.BOS)
	}
	// Every text follows the start or a special token, so each gets the
	// space prefix, as llama.cpp's SPM session gives it.
	for _, p := range t.specials.Partition(spans) {
		if p.Token >= 0 {
			out = append(out, p.Token)
			continue
		}
		out = append(out, t.Vocab.Tokenize(p.Text, false)...)
	}
	if addSpecial && t.Vocab.AddEOS {
		out = append(out, testmodel.EOS)
	}
	return out
}

// AppendPiece implements backend.Tokenizer.
func (t *Tokenizer) AppendPiece(dst []byte, token int32, special bool) ([]byte, error) {
	if token < 0 || int(token) >= t.Vocab.Size() {
		return dst, fmt.Errorf("scripted: %w: %d not in [0,%d)", backend.ErrTokenOutOfRange, token, t.Vocab.Size())
	}
	text := t.Vocab.Tokens[token]
	switch t.Vocab.Types[token] {
	case testmodel.TokenNormal:
		return append(dst, strings.ReplaceAll(text, testmodel.Space, " ")...), nil
	case testmodel.TokenByte:
		return append(dst, byte(token-testmodel.FirstByte)), nil
	case testmodel.TokenControl, testmodel.TokenUnknown:
		if special {
			return append(dst, text...), nil
		}
	}
	return dst, nil
}

// IsEOG implements backend.Tokenizer.
func (t *Tokenizer) IsEOG(token int32) bool {
	for _, e := range t.eog {
		if token == e {
			return true
		}
	}
	return false
}

// EOGTokens implements backend.Tokenizer.
func (t *Tokenizer) EOGTokens() []int32 { return append([]int32(nil), t.eog...) }

// AddsBOS implements backend.Tokenizer.
func (t *Tokenizer) AddsBOS() bool { return t.Vocab.AddBOS }

// ApplyChatTemplate implements backend.ChatTemplater with llama.cpp's
// built-in "chatml" template.
func (t *Tokenizer) ApplyChatTemplate(messages []backend.Message, addAssistant bool) (string, error) {
	var b strings.Builder
	for _, m := range messages {
		fmt.Fprintf(&b, "%s%s\n%s%s\n", testmodel.ImStart, m.Role, m.Content, testmodel.ImEnd)
	}
	if addAssistant {
		b.WriteString(testmodel.ImStart + "assistant\n")
	}
	return b.String(), nil
}

// TokenizeChat implements backend.ChatTokenizer as llamacpp.Vocab does:
// only the markers render writes around the contents become control
// tokens, unless parseSpecial.
func (t *Tokenizer) TokenizeChat(render func(contents []string) (string, error), contents []string, parseSpecial bool) ([]int32, error) {
	if parseSpecial {
		text, err := render(contents)
		if err != nil {
			return nil, err
		}
		return t.tokenizeSpans([]spectok.Span{{Text: text, Special: true}}, false), nil
	}
	spans, placed, err := spectok.Split(render, contents)
	if err != nil {
		return nil, err
	}
	for i, c := range contents {
		if placed != nil && placed[i] {
			continue
		}
		if tok, ok := t.specials.FindControl(c); ok {
			return nil, &spectok.ContentError{Index: i, Token: tok.Text}
		}
	}
	return t.tokenizeSpans(spans, false), nil
}

// Spell returns tokens whose pieces are exactly text, for a model to write:
// the control tokens' texts become those tokens, and each text between them
// is spelled with the longest piece at each place (a space as "▁"), or a
// byte token where no piece starts. Unlike Tokenize, it adds no space
// prefix.
func (t *Tokenizer) Spell(text string) []int32 {
	var out []int32
	for _, p := range t.specials.Partition([]spectok.Span{{Text: text, Special: true}}) {
		if p.Token >= 0 {
			out = append(out, p.Token)
			continue
		}
		s := strings.ReplaceAll(p.Text, " ", testmodel.Space)
		for len(s) > 0 {
			n := min(len(s), t.maxPiece)
			for ; n > 0; n-- {
				if id, ok := t.Vocab.ID(s[:n]); ok && t.Vocab.Types[id] == testmodel.TokenNormal {
					out = append(out, id)
					break
				}
			}
			if n == 0 {
				out = append(out, testmodel.FirstByte+int32(s[0]))
				n = 1
			}
			s = s[n:]
		}
	}
	return out
}

// Text returns the text of tokens as the server spells them (control
// tokens as their text).
func (t *Tokenizer) Text(tokens []int32) string {
	var b []byte
	for _, tok := range tokens {
		b, _ = t.AppendPiece(b, tok, true)
	}
	return string(b)
}

// The tokenizer satisfies the contracts the server looks for.
var (
	_ backend.Tokenizer     = (*Tokenizer)(nil)
	_ backend.ChatTemplater = (*Tokenizer)(nil)
	_ backend.ChatTokenizer = (*Tokenizer)(nil)
)
