package grammar

import (
	"errors"
	"fmt"
	"slices"
)

// PieceSource is what a vocabulary is read from: backend.Tokenizer and llamacpp's *Vocab
// satisfy it.
type PieceSource interface {
	// AppendPiece appends the bytes of token to dst (without special-token text).
	AppendPiece(dst []byte, token int32, special bool) ([]byte, error)
	// IsEOG reports whether token ends generation.
	IsEOG(token int32) bool
}

// Vocabulary is the byte string of every token of a model, with its end-of-generation tokens,
// indexed by a prefix trie. It is immutable, safe for concurrent use, and shared by every grammar
// used with the model: build it once per model.
type Vocabulary struct {
	data []byte  // every token's bytes, concatenated
	off  []int32 // token t is data[off[t]:off[t+1]]
	eog  []int32 // end-of-generation tokens, sorted
	// never lists the tokens that no grammar allows: no bytes and not end of generation.
	never []int32

	// The trie of the token byte strings in preorder (the root left out): node i is byte
	// tbyte[i] at depth tdepth[i] (1 for the first byte); its subtree ends before tend[i];
	// the tokens spelled exactly by it are ttok[tfirst[i]:tfirst[i+1]].
	tbyte    []byte
	tdepth   []uint16
	tend     []int32
	tfirst   []int32
	ttok     []int32
	maxDepth int
}

// maxTokenLen bounds the bytes of one token (the trie's depth is a uint16).
const maxTokenLen = 1 << 15

// NewVocabulary builds the vocabulary of tokens (tokens[t] is the byte string of token t, not
// kept) whose end-of-generation tokens are eog. A token with no bytes that is not listed in eog
// is never allowed, as in llama.cpp.
func NewVocabulary(tokens [][]byte, eog []int32) (*Vocabulary, error) {
	if len(tokens) == 0 {
		return nil, errors.New("grammar: empty vocabulary")
	}
	v := &Vocabulary{off: make([]int32, len(tokens)+1)}
	isEOG := make([]bool, len(tokens))
	for _, t := range eog {
		if t < 0 || int(t) >= len(tokens) {
			return nil, fmt.Errorf("grammar: end-of-generation token %d outside the vocabulary of %d tokens", t, len(tokens))
		}
		isEOG[t] = true
	}
	total := 0
	for t, b := range tokens {
		if len(b) > maxTokenLen {
			return nil, fmt.Errorf("grammar: token %d has %d bytes (at most %d)", t, len(b), maxTokenLen)
		}
		total += len(b)
	}
	v.data = make([]byte, 0, total)
	for t, b := range tokens {
		v.data = append(v.data, b...)
		v.off[t+1] = int32(len(v.data))
		switch {
		case isEOG[t]:
			v.eog = append(v.eog, int32(t))
		case len(b) == 0:
			v.never = append(v.never, int32(t))
		}
	}
	v.buildTrie(isEOG)
	return v, nil
}

// VocabularyFrom reads the n tokens of src (a backend.Tokenizer, a llamacpp *Vocab).
func VocabularyFrom(src PieceSource, n int) (*Vocabulary, error) {
	tokens := make([][]byte, n)
	var eog []int32
	var buf []byte
	for t := range n {
		var err error
		start := len(buf)
		if buf, err = src.AppendPiece(buf, int32(t), false); err != nil {
			return nil, fmt.Errorf("grammar: piece of token %d: %w", t, err)
		}
		tokens[t] = buf[start:len(buf):len(buf)]
		if src.IsEOG(int32(t)) {
			eog = append(eog, int32(t))
		}
	}
	return NewVocabulary(tokens, eog)
}

// Size returns the number of tokens.
func (v *Vocabulary) Size() int { return len(v.off) - 1 }

// Token returns the bytes of token t (read only).
func (v *Vocabulary) Token(t int32) []byte { return v.data[v.off[t]:v.off[t+1]] }

// IsEOG reports whether t ends generation.
func (v *Vocabulary) IsEOG(t int32) bool {
	_, ok := slices.BinarySearch(v.eog, t)
	return ok
}

// buildTrie sorts the tokens by their bytes and lays out their prefix trie in preorder.
func (v *Vocabulary) buildTrie(isEOG []bool) {
	order := make([]int32, 0, v.Size())
	for t := range v.Size() {
		if !isEOG[t] && v.off[t+1] > v.off[t] {
			order = append(order, int32(t))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := slices.Compare(v.Token(a), v.Token(b)); c != 0 {
			return c
		}
		return int(a - b)
	})
	// In sorted order, token k shares a prefix with token k-1; the nodes it adds are its bytes
	// past that common prefix. path[d] is the node at depth d+1 of the current path.
	var path []int32
	var prev []byte
	for _, t := range order {
		b := v.Token(t)
		common := 0
		for common < len(prev) && common < len(b) && prev[common] == b[common] {
			common++
		}
		for _, n := range path[common:] {
			v.tend[n] = int32(len(v.tbyte))
		}
		path = path[:common]
		for d := common; d < len(b); d++ {
			n := int32(len(v.tbyte))
			v.tbyte = append(v.tbyte, b[d])
			v.tdepth = append(v.tdepth, uint16(d+1))
			v.tend = append(v.tend, 0)
			v.tfirst = append(v.tfirst, int32(len(v.ttok)))
			path = append(path, n)
		}
		// Tokens are appended in node order, so each node's tokens are contiguous.
		v.ttok = append(v.ttok, t)
		v.maxDepth = max(v.maxDepth, len(b))
		prev = b
	}
	for _, n := range path {
		v.tend[n] = int32(len(v.tbyte))
	}
	v.tfirst = append(v.tfirst, int32(len(v.ttok)))
}
