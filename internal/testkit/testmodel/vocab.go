package testmodel

import (
	"container/heap"
	"fmt"
	"strings"
)

// TokenType is llama.cpp's llama_token_type, stored per token in
// "tokenizer.ggml.token_type".
type TokenType int32

// The token types llama.cpp knows.
const (
	TokenNormal      TokenType = 1
	TokenUnknown     TokenType = 2
	TokenControl     TokenType = 3
	TokenUserDefined TokenType = 4
	TokenUnused      TokenType = 5
	TokenByte        TokenType = 6
)

// Space is SentencePiece's visible space, U+2581, which stands for ' ' in
// token pieces.
const Space = "▁"

// The fixed ids of every vocabulary built here.
const (
	UNK int32 = 0 // "<unk>"
	BOS int32 = 1 // "<s>"
	EOS int32 = 2 // "</s>"
	// FirstByte is the id of "<0x00>"; byte b is FirstByte+b.
	FirstByte int32 = 3
)

// ChatMLTemplate is the Jinja chat template of the variants with chat tokens;
// llama.cpp recognises it as "chatml".
const ChatMLTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// The chat control tokens of the variants with a chat template.
const (
	ImStart = "<|im_start|>"
	ImEnd   = "<|im_end|>"
)

// Vocab is a SentencePiece ("llama") vocabulary as llama.cpp loads it. Every
// vocabulary built here starts with <unk>, <s>, </s> and the 256 byte tokens
// <0x00>..<0xFF>, and its multi-character normal pieces are closed under
// prefixes that start with "▁", so that llama.cpp's SPM merges reach every
// piece.
type Vocab struct {
	Tokens []string
	Scores []float32
	Types  []TokenType
	// AddBOS and AddEOS are written as tokenizer.ggml.add_bos_token and
	// add_eos_token.
	AddBOS, AddEOS bool
	// ChatTemplate is written as tokenizer.chat_template when not empty.
	ChatTemplate string

	ids map[string]int32
}

// Size returns the number of tokens.
func (v *Vocab) Size() int { return len(v.Tokens) }

// ID returns the id of the token whose text is piece.
func (v *Vocab) ID(piece string) (int32, bool) {
	id, ok := v.ids[piece]
	return id, ok
}

// vocabBuilder appends unique tokens.
type vocabBuilder struct{ v *Vocab }

func newVocabBuilder() *vocabBuilder {
	b := &vocabBuilder{v: &Vocab{AddBOS: true, ids: map[string]int32{}}}
	b.add("<unk>", 0, TokenUnknown)
	b.add("<s>", 0, TokenControl)
	b.add("</s>", 0, TokenControl)
	for i := 0; i < 256; i++ {
		b.add(fmt.Sprintf("<0x%02X>", i), 0, TokenByte)
	}
	return b
}

// add appends a token unless its text is taken; it reports whether it did.
func (b *vocabBuilder) add(text string, score float32, typ TokenType) bool {
	if _, ok := b.v.ids[text]; ok {
		return false
	}
	b.v.ids[text] = int32(len(b.v.Tokens))
	b.v.Tokens = append(b.v.Tokens, text)
	b.v.Scores = append(b.v.Scores, score)
	b.v.Types = append(b.v.Types, typ)
	return true
}

// addChat adds the ChatML control tokens and template.
func (b *vocabBuilder) addChat() {
	b.add(ImStart, 0, TokenControl)
	b.add(ImEnd, 0, TokenControl)
	b.v.ChatTemplate = ChatMLTemplate
}

// addASCII adds every printable ASCII character but the space, and "▁", as
// single-character pieces.
func (b *vocabBuilder) addASCII() {
	b.piece(Space)
	for c := byte('!'); c <= '~'; c++ {
		b.piece(string(c))
	}
}

// piece adds a normal piece, scored so that earlier pieces are preferred as
// in SentencePiece (the score only orders merges).
func (b *vocabBuilder) piece(text string) bool {
	return b.add(text, -float32(len(b.v.Tokens)), TokenNormal)
}

// word adds "▁"+w and all its prefixes that start with "▁", shortest first.
func (b *vocabBuilder) word(w string) {
	p := Space
	for _, r := range w {
		p += string(r)
		b.piece(p)
	}
}

// Tokenize splits text into tokens exactly as llama.cpp's SPM tokenizer does
// for these vocabularies with add_space_prefix and without special-token
// parsing: it prepends a space, replaces spaces with "▁", merges the adjacent
// pair whose concatenation is the highest-scored token (leftmost first) until
// none is left, and spells symbols that are no token as byte tokens. With
// addSpecial it prepends BOS (and appends EOS) as the vocabulary asks.
func (v *Vocab) Tokenize(text string, addSpecial bool) []int32 {
	var out []int32
	if addSpecial && v.AddBOS {
		out = append(out, BOS)
	}
	if text != "" {
		out = v.spm(Space+strings.ReplaceAll(text, " ", Space), out)
	}
	if addSpecial && v.AddEOS {
		out = append(out, EOS)
	}
	return out
}

type symbol struct {
	start, n   int
	prev, next int
}

type bigram struct {
	left, right int
	score       float32
	size        int
}

// bigramQueue pops the highest score first, then the leftmost.
type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	return q[i].score > q[j].score || (q[i].score == q[j].score && q[i].left < q[j].left)
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// utf8Len is llama.cpp's unicode_len_utf8: the length implied by the lead
// byte, 1 for continuation bytes.
func utf8Len(c byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[c>>4]
}

func (v *Vocab) spm(text string, out []int32) []int32 {
	var syms []symbol
	for offs := 0; offs < len(text); {
		n := min(utf8Len(text[offs]), len(text)-offs)
		next := len(syms) + 1
		if offs+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: offs, n: n, prev: len(syms) - 1, next: next})
		offs += n
	}
	symText := func(i int) string { return text[syms[i].start : syms[i].start+syms[i].n] }

	var q bigramQueue
	revMerge := map[string][2]int{}
	tryAdd := func(left, right int) {
		if left == -1 || right == -1 {
			return
		}
		s := text[syms[left].start : syms[left].start+syms[left].n+syms[right].n]
		id, ok := v.ids[s]
		if !ok {
			return
		}
		heap.Push(&q, bigram{left: left, right: right, score: v.Scores[id], size: len(s)})
		revMerge[s] = [2]int{left, right}
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.Len() > 0 {
		b := heap.Pop(&q).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}

	var resegment func(i int)
	resegment = func(i int) {
		s := symText(i)
		if id, ok := v.ids[s]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[s]; ok {
			resegment(p[0])
			resegment(p[1])
			return
		}
		for j := 0; j < len(s); j++ {
			out = append(out, FirstByte+int32(s[j]))
		}
	}
	for i := 0; i != -1 && len(syms) > 0; i = syms[i].next {
		resegment(i)
	}
	return out
}

// Piece returns what llama.cpp's llama_token_to_piece gives for id without
// special rendering: "" for control and unknown tokens, the raw byte for a
// byte token, the text with "▁" replaced by " " for a normal token. It returns
// "" for an id out of range.
func (v *Vocab) Piece(id int32) string {
	if id < 0 || int(id) >= len(v.Tokens) {
		return ""
	}
	switch v.Types[id] {
	case TokenNormal:
		return strings.ReplaceAll(v.Tokens[id], Space, " ")
	case TokenByte:
		return string([]byte{byte(id - FirstByte)})
	case TokenUserDefined:
		return v.Tokens[id]
	}
	return ""
}

// Detokenize concatenates the pieces of ids as llama.cpp's llama_detokenize
// does with remove_special and unparse_special false: control tokens vanish
// and the first token loses one leading space (a BOS in front counts as that
// first token, so text after it keeps its space).
func (v *Vocab) Detokenize(ids []int32) string {
	var sb strings.Builder
	for i, id := range ids {
		p := v.Piece(id)
		if i == 0 {
			p = strings.TrimPrefix(p, " ")
		}
		sb.WriteString(p)
	}
	return sb.String()
}

// tinyWords are the whole-word pieces of the tiny vocabulary.
var tinyWords = strings.Fields(`the of and to a in is it you that he was for on are with as I his they be
at one have this from or had by hot word but what some we can out other were all there when up use your
how said an each she which do their time if will way about many then them write would like so these her
long make thing see him two has look more day could go come did number sound no most people my over know
water than call first who may down side been now find any new work part take get place made live where
after back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too same tell
does set three want air well also play small end put home read hand port large spell add even land here
must big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father The A It He She They We You model token llama loop Go text`)

// TinyVocab returns the vocabulary of the tiny and oracle models: the fixed
// specials and bytes, optionally the ChatML tokens <|im_start|> and
// <|im_end|> with their template, the printable ASCII characters and "▁" as
// single pieces, and about two hundred common words with their prefixes.
func TinyVocab(chat bool) *Vocab {
	b := newVocabBuilder()
	if chat {
		b.addChat()
	}
	b.addASCII()
	for _, w := range tinyWords {
		b.word(w)
	}
	return b.v
}

// BenchVocab returns a vocabulary of exactly size tokens: TinyVocab(true)
// filled up with generated lowercase pieces "▁a".."▁z", "▁aa".. in
// breadth-first order (so still closed under prefixes).
func BenchVocab(size int) (*Vocab, error) {
	b := newVocabBuilder()
	b.addChat()
	b.addASCII()
	for _, w := range tinyWords {
		b.word(w)
	}
	if len(b.v.Tokens) > size {
		return nil, fmt.Errorf("testmodel: vocabulary size %d is below the %d base tokens", size, len(b.v.Tokens))
	}
	level := []string{Space}
	for len(b.v.Tokens) < size {
		var next []string
		for _, p := range level {
			for c := 'a'; c <= 'z'; c++ {
				s := p + string(c)
				next = append(next, s)
				if len(b.v.Tokens) < size {
					b.piece(s)
				}
			}
		}
		level = next
	}
	return b.v, nil
}
