package llamacpp

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/spectok"
)

// Vocab is a model's vocabulary and tokenizer. It is safe for concurrent use,
// also with its model's Close, and lives as long as its model: after Close
// its methods return ErrClosed (its constants, such as EOS, stay valid).
type Vocab struct {
	model *Model
	c     cgo.Vocab
	n     int
	// read once at load, so that they stay valid after Close
	bos, eos, eot, pad int32
	addBOS, addEOS     bool
	noTokenizer        bool
	eog                []int32
	// specials are the special tokens, found in texts in Go rather than
	// by llama.cpp, whose search is quadratic in their count (read at the
	// first tokenization).
	specials func() *spectok.Set
	// ends are the tokens that addSpecial adds to no text (read once).
	ends func() ([]int32, error)
}

// maxText bounds the bytes and tokens handed to llama.cpp, whose lengths are
// int32.
const maxText = 1<<31 - 1

func newVocab(m *Model, c cgo.Vocab) *Vocab {
	v := &Vocab{model: m, c: c, n: c.NTokens(), bos: c.BOS(), eos: c.EOS(), eot: c.EOT(), pad: c.PAD(),
		addBOS: c.AddBOS(), addEOS: c.AddEOS(), noTokenizer: c.Type() == 0}
	for t := range int32(v.n) {
		if c.IsEOG(t) {
			v.eog = append(v.eog, t)
		}
	}
	v.specials = sync.OnceValue(v.readSpecials)
	v.ends = sync.OnceValues(func() ([]int32, error) { return v.tokenizeText("", true) })
	return v
}

// readSpecials lists the tokens llama.cpp's tokenizer matches by their
// text: control, user-defined and unknown ones. Its caller holds the model.
func (v *Vocab) readSpecials() *spectok.Set {
	var toks []spectok.Token
	for t := range int32(v.n) {
		a := TokenAttr(v.c.Attr(t))
		if a&(AttrControl|AttrUserDefined|AttrUnknown) == 0 {
			continue
		}
		toks = append(toks, spectok.Token{ID: t, Text: v.c.Text(t), Control: a&(AttrControl|AttrUnknown) != 0,
			LStrip: a&AttrLStrip != 0, RStrip: a&AttrRStrip != 0})
	}
	return spectok.NewSet(toks)
}

// TokenAttr is the bit set of llama_token_attr.
type TokenAttr uint32

// Token attributes.
const (
	AttrUnknown     TokenAttr = 1 << 0
	AttrUnused      TokenAttr = 1 << 1
	AttrNormal      TokenAttr = 1 << 2
	AttrControl     TokenAttr = 1 << 3
	AttrUserDefined TokenAttr = 1 << 4
	AttrByte        TokenAttr = 1 << 5
	AttrNormalized  TokenAttr = 1 << 6
	AttrLStrip      TokenAttr = 1 << 7
	AttrRStrip      TokenAttr = 1 << 8
	AttrSingleWord  TokenAttr = 1 << 9
)

// enter keeps the model from being freed until leave, or reports that it
// was: a Vocab is safe for concurrent use, also with its model's Close,
// which waits for the calls in flight. Each successful enter needs a leave.
func (v *Vocab) enter() error {
	v.model.live.RLock()
	if v.model.freed.Load() {
		v.model.live.RUnlock()
		return fmt.Errorf("vocabulary: model %w", ErrClosed)
	}
	return nil
}

func (v *Vocab) leave() { v.model.live.RUnlock() }

// enterTokenizer is enter for a model with a tokenizer (GGUF tokenizer
// "none" has none).
func (v *Vocab) enterTokenizer() error {
	if err := v.enter(); err != nil {
		return err
	}
	if v.noTokenizer {
		v.leave()
		return invalid("the model has no tokenizer")
	}
	return nil
}

// enterToken is enter for a call about token t.
func (v *Vocab) enterToken(t int32) error {
	if t < 0 || int(t) >= v.n {
		if err := v.alive(); err != nil {
			return err
		}
		return invalid("token %d outside the vocabulary [0, %d)", t, v.n)
	}
	return v.enter()
}

// alive reports a freed model without holding it.
func (v *Vocab) alive() error {
	if v.model.freed.Load() {
		return fmt.Errorf("vocabulary: model %w", ErrClosed)
	}
	return nil
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.n }

// BOS is the beginning-of-sequence token, or -1.
func (v *Vocab) BOS() int32 { return v.bos }

// EOS is the end-of-sequence token, or -1.
func (v *Vocab) EOS() int32 { return v.eos }

// EOT is the end-of-turn token, or -1.
func (v *Vocab) EOT() int32 { return v.eot }

// PAD is the padding token, or -1.
func (v *Vocab) PAD() int32 { return v.pad }

// AddsBOS reports whether Tokenize with addSpecial prepends BOS.
func (v *Vocab) AddsBOS() bool { return v.addBOS }

// AddsEOS reports whether Tokenize with addSpecial appends EOS.
func (v *Vocab) AddsEOS() bool { return v.addEOS }

// IsEOG reports whether t ends generation (EOS, EOT, and the tokens
// llama.cpp recognises as ending a turn); false for ids outside the
// vocabulary.
func (v *Vocab) IsEOG(t int32) bool {
	for _, e := range v.eog {
		if e == t {
			return true
		}
	}
	return false
}

// EOGTokens lists every end-of-generation token in increasing order. The
// slice is shared: do not modify it.
func (v *Vocab) EOGTokens() []int32 { return v.eog }

// Attr returns the attributes of token t.
func (v *Vocab) Attr(t int32) (TokenAttr, error) {
	if err := v.enterToken(t); err != nil {
		return 0, err
	}
	defer v.leave()
	if v.noTokenizer {
		// llama.cpp asserts a vocabulary type for every token query.
		return 0, invalid("the model has no tokenizer")
	}
	return TokenAttr(v.c.Attr(t)), nil
}

// Text returns the raw piece of t as stored in the model (SPM pieces hold
// U+2581 for a space).
func (v *Vocab) Text(t int32) (string, error) {
	if err := v.enterToken(t); err != nil {
		return "", err
	}
	defer v.leave()
	if v.noTokenizer {
		// llama.cpp asserts a vocabulary type for every token query.
		return "", invalid("the model has no tokenizer")
	}
	return v.c.Text(t), nil
}

// Score returns the tokenizer score of t.
func (v *Vocab) Score(t int32) (float32, error) {
	if err := v.enterToken(t); err != nil {
		return 0, err
	}
	defer v.leave()
	if v.noTokenizer {
		// llama.cpp asserts a vocabulary type for every token query.
		return 0, invalid("the model has no tokenizer")
	}
	return v.c.Score(t), nil
}

// Tokenize converts text into tokens. addSpecial adds BOS/EOS when the model
// asks for them; parseSpecial turns special-token text (e.g. "<|im_end|>")
// into control tokens instead of plain text. It gives llama.cpp's tokens in
// time linear in the text (see tokenizeSpans).
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return v.tokenizeSpans([]spectok.Span{{Text: text, Special: parseSpecial}}, addSpecial)
}

// tokenizeSpans tokenizes the text of spans, joined, as Tokenize would with
// parseSpecial inside the Special spans and without it elsewhere: the text
// of a control token becomes that token only inside a Special span. The
// special tokens are found in Go, in time linear in the text, and llama.cpp
// tokenizes the texts between them one by one, which gives its own tokens
// (it partitions a text at its special tokens and tokenizes each piece
// alone too).
func (v *Vocab) tokenizeSpans(spans []spectok.Span, addSpecial bool) ([]int32, error) {
	if err := v.enterTokenizer(); err != nil {
		return nil, err
	}
	defer v.leave()
	total := 0
	for _, sp := range spans {
		total += len(sp.Text)
	}
	if total > maxText-2 {
		return nil, invalid("text of %d bytes is too long to tokenize", total)
	}
	var prefix, suffix []int32
	if addSpecial {
		ends, err := v.ends()
		if err != nil {
			return nil, err
		}
		// The tokens of no text are the BOS (WPM's CLS) that comes first
		// and the EOS (SEP) that comes last.
		n := 0
		if len(ends) > 0 && (v.addBOS || v.c.Type() == vocabWPM) {
			n = 1
		}
		prefix, suffix = ends[:n], ends[n:]
	}
	out := make([]int32, 0, total/3+len(prefix)+len(suffix)+2)
	out = append(out, prefix...)
	for _, p := range v.specials().Partition(spans) {
		if p.Token >= 0 {
			out = append(out, p.Token)
			continue
		}
		toks, err := v.tokenizeText(p.Text, false)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return append(out, suffix...), nil
}

// vocabWPM is LLAMA_VOCAB_TYPE_WPM, whose special tokens llama.cpp adds
// whatever add_bos says.
const vocabWPM = 3

// tokenizeText is llama_tokenize of text without special-token parsing;
// its caller holds the model.
func (v *Vocab) tokenizeText(text string, addSpecial bool) ([]int32, error) {
	out := make([]int32, len(text)+2)
	n := v.c.Tokenize(text, out, addSpecial, false)
	if n < 0 {
		if n == -1<<31 {
			return nil, invalid("text too long to tokenize (%d bytes)", len(text))
		}
		out = make([]int32, -n)
		n = v.c.Tokenize(text, out, addSpecial, false)
		if n < 0 {
			return nil, fmt.Errorf("llamacpp: tokenize failed (%d)", n)
		}
	}
	return out[:n], nil
}

// TokenizeChat tokenizes the chat that render writes with contents (the
// texts of its messages), with no special tokens added, so that only the
// template's own markers become control tokens: the text of a control token
// inside a content stays text, unless parseSpecial, as transformers'
// split_special_tokens has it. render must write the same text around any
// contents. A template that changes contents in a way the alignment of
// spectok.Split does not follow is tokenized as a whole; a content holding
// a control token's text that could not be placed so, or that render does
// not write (a caller may pass texts it cannot mark, such as a tool's JSON,
// to have them checked), is an error (*spectok.ContentError). It
// implements backend.ChatTokenizer.
func (v *Vocab) TokenizeChat(render func(contents []string) (string, error), contents []string, parseSpecial bool) ([]int32, error) {
	if err := v.alive(); err != nil {
		return nil, err
	}
	if parseSpecial {
		text, err := render(contents)
		if err != nil {
			return nil, err
		}
		return v.tokenizeSpans([]spectok.Span{{Text: text, Special: true}}, false)
	}
	spans, placed, err := spectok.Split(render, contents)
	if err != nil {
		return nil, err
	}
	if err := v.enterTokenizer(); err != nil {
		return nil, err
	}
	set := v.specials()
	v.leave()
	for i, c := range contents {
		if placed != nil && placed[i] {
			continue
		}
		if t, ok := set.FindControl(c); ok {
			return nil, &spectok.ContentError{Index: i, Token: t.Text}
		}
	}
	return v.tokenizeSpans(spans, false)
}

// AppendPiece appends the bytes of token t to dst. A byte-fallback token is a
// single byte, so a piece may be part of a UTF-8 sequence. special renders
// control tokens as their text; otherwise they render as nothing.
func (v *Vocab) AppendPiece(dst []byte, t int32, special bool) ([]byte, error) {
	if err := v.enterToken(t); err != nil {
		return dst, err
	}
	defer v.leave()
	if v.noTokenizer {
		return dst, invalid("the model has no tokenizer")
	}
	start := len(dst)
	dst = slices.Grow(dst, 32)
	for {
		free := dst[start:cap(dst)]
		free = free[:min(len(free), 1<<20)] // a piece is short; lengths are int32 in C
		n := v.c.TokenToPiece(t, free, 0, special)
		if n >= 0 {
			return dst[:start+int(n)], nil
		}
		dst = slices.Grow(dst[:start], int(-n))
	}
}

// Piece returns the text of token t (see AppendPiece).
func (v *Vocab) Piece(t int32, special bool) (string, error) {
	b, err := v.AppendPiece(nil, t, special)
	return string(b), err
}

// Detokenize converts tokens back into text. removeSpecial drops a leading
// BOS and trailing EOS that the model adds; unparseSpecial renders control
// tokens as text.
func (v *Vocab) Detokenize(tokens []int32, removeSpecial, unparseSpecial bool) (string, error) {
	if err := v.enterTokenizer(); err != nil {
		return "", err
	}
	defer v.leave()
	if len(tokens) > maxText/16 {
		return "", invalid("%d tokens are too many to detokenize at once", len(tokens))
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= v.n {
			return "", invalid("token %d outside the vocabulary [0, %d)", t, v.n)
		}
	}
	buf := make([]byte, 8*len(tokens)+16)
	n := v.c.Detokenize(tokens, buf, removeSpecial, unparseSpecial)
	if n < 0 {
		buf = make([]byte, -n)
		n = v.c.Detokenize(tokens, buf, removeSpecial, unparseSpecial)
		if n < 0 {
			return "", fmt.Errorf("llamacpp: detokenize failed (%d)", n)
		}
	}
	return string(buf[:n]), nil
}

// ApplyChatTemplate renders messages with the model's chat template, or with
// template when it is not empty (a template's text or a built-in name such
// as "chatml" or "llama3"). addAssistant appends the assistant-turn prefix.
// llama.cpp does not run Jinja: it recognises known templates and formats
// them with its own code, so an unrecognised template is an error.
func (v *Vocab) ApplyChatTemplate(template string, messages []backend.Message, addAssistant bool) (string, error) {
	if err := v.alive(); err != nil {
		return "", err
	}
	if template == "" {
		t, ok := v.model.ChatTemplate("")
		if !ok {
			if v.model.acquire() != nil {
				return "", fmt.Errorf("vocabulary: model %w", ErrClosed)
			}
			v.model.release()
			return "", invalid("the model has no chat template")
		}
		template = t
	}
	if strings.IndexByte(template, 0) >= 0 {
		return "", invalid("chat template contains a NUL byte")
	}
	roles := make([]string, len(messages))
	contents := make([]string, len(messages))
	size := 64
	for i, m := range messages {
		if !utf8.ValidString(m.Role) || !utf8.ValidString(m.Content) {
			return "", invalid("message %d is not valid UTF-8", i)
		}
		// llama.cpp reads the messages as C strings: a NUL would silently
		// end the message there.
		if strings.IndexByte(m.Role, 0) >= 0 || strings.IndexByte(m.Content, 0) >= 0 {
			return "", invalid("message %d contains a NUL byte, which llama.cpp's chat templates cannot carry", i)
		}
		roles[i], contents[i] = m.Role, m.Content
		size += 2*len(m.Content) + len(m.Role) + 32
	}
	if size > maxText {
		return "", invalid("chat of %d bytes is too long", size)
	}
	buf := make([]byte, size)
	n := cgo.ChatApplyTemplate(template, roles, contents, addAssistant, buf)
	if n < 0 {
		return "", invalid("chat template not recognised by llama.cpp")
	}
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = cgo.ChatApplyTemplate(template, roles, contents, addAssistant, buf)
	}
	return string(buf[:n]), nil
}
