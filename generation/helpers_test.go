package generation

import (
	"errors"
	"math"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
)

// Vocabulary of the test tokenizer. Token ids are the indices of testPieces.
const (
	tokBOS = 0
	tokEOS = 1
	tokEOT = 2
)

var testPieces = []string{
	"<s>", "</s>", "<|eot|>", "<|user|>", "<|assistant|>", "<|end|>",
	"He", "llo", " wo", "rld", "!", " ", "\xc3", "\xa9", "é", "a",
	"b", "c", "lo", "\xe2\x82", "\xac", "\xff", "d", "e",
}

func tokenID(piece string) int32 {
	for i, p := range testPieces {
		if p == piece {
			return int32(i)
		}
	}
	panic("no token " + piece)
}

// testTokenizer is a word-table tokenizer over testPieces: greedy longest
// match, with <s> added in front when addBOS. Tokens 0-5 are special.
type testTokenizer struct {
	addBOS bool
}

func isSpecial(t int32) bool { return t <= 5 }

func (tk testTokenizer) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var toks []int32
	if addSpecial && tk.addBOS {
		toks = append(toks, tokBOS)
	}
	for len(text) > 0 {
		best, bestLen := -1, 0
		for i, p := range testPieces {
			if isSpecial(int32(i)) && !parseSpecial {
				continue
			}
			if len(p) > bestLen && strings.HasPrefix(text, p) {
				best, bestLen = i, len(p)
			}
		}
		if best < 0 {
			return nil, errors.New("no token for " + text)
		}
		toks = append(toks, int32(best))
		text = text[bestLen:]
	}
	return toks, nil
}

func (testTokenizer) AppendPiece(dst []byte, token int32, special bool) ([]byte, error) {
	if token < 0 || int(token) >= len(testPieces) {
		return dst, errors.New("token out of range")
	}
	if isSpecial(token) && !special {
		return dst, nil
	}
	return append(dst, testPieces[token]...), nil
}

func (testTokenizer) IsEOG(token int32) bool { return token == tokEOS || token == tokEOT }
func (testTokenizer) EOGTokens() []int32     { return []int32{tokEOS, tokEOT} }
func (tk testTokenizer) AddsBOS() bool       { return tk.addBOS }

func (testTokenizer) ApplyChatTemplate(messages []backend.Message, addAssistant bool) (string, error) {
	var b strings.Builder
	for _, m := range messages {
		if m.Role != "user" {
			return "", errors.New("unknown role " + m.Role)
		}
		b.WriteString("<|user|>" + m.Content + "<|end|>")
	}
	if addAssistant {
		b.WriteString("<|assistant|>")
	}
	return b.String(), nil
}

// chainModel gives the token next[last] a logit of 10 and every other token
// 0, so greedy decoding follows the chain; a last token without successor
// gets EOS.
func chainModel(vocab int, next map[int32]int32) backend.ModelFunc {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		clear(buf)
		n, ok := next[history[len(history)-1]]
		if !ok {
			n = tokEOS
		}
		buf[n] = 10
		return buf, nil
	}
}

// markovModel returns log(p[last][next]): a Markov chain whose next-token
// distribution is known exactly.
func markovModel(p [][]float64) backend.ModelFunc {
	buf := make([]float32, len(p[0]))
	return func(history []int32) ([]float32, error) {
		for i, q := range p[history[len(history)-1]] {
			buf[i] = float32(math.Log(q))
		}
		return buf, nil
	}
}

func intp(n int) *int { return &n }
