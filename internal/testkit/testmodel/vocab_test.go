package testmodel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pieces(v *Vocab, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = v.Tokens[id]
	}
	return out
}

func TestVocabLayout(t *testing.T) {
	for name, v := range map[string]*Vocab{"tiny": TinyVocab(false), "tiny-chat": TinyVocab(true), "demo": mustDemo(t).Spec.Vocab} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, []string{"<unk>", "<s>", "</s>"}, v.Tokens[:3])
			assert.Equal(t, []TokenType{TokenUnknown, TokenControl, TokenControl}, v.Types[:3])
			for b := 0; b < 256; b++ {
				id := FirstByte + int32(b)
				require.Equal(t, fmt.Sprintf("<0x%02X>", b), v.Tokens[id])
				require.Equal(t, TokenByte, v.Types[id])
			}
			assert.Equal(t, "<0x0A>", v.Tokens[FirstByte+10])
			seen := map[string]bool{}
			for i, tok := range v.Tokens {
				require.False(t, seen[tok], "duplicate token %q", tok) // llama.cpp asserts uniqueness
				require.NotEmpty(t, tok)
				seen[tok] = true
				id, ok := v.ID(tok)
				require.True(t, ok)
				require.Equal(t, int32(i), id)
				// Closure under prefixes: SPM can only reach a piece through
				// pieces one character shorter.
				if v.Types[i] == TokenNormal && strings.HasPrefix(tok, Space) && tok != Space {
					_, size := utf8.DecodeLastRuneInString(tok)
					require.True(t, seen[tok[:len(tok)-size]], "prefix of %q missing", tok)
				}
			}
			assert.Len(t, v.Scores, v.Size())
			assert.Len(t, v.Types, v.Size())
			assert.True(t, v.AddBOS)
			assert.False(t, v.AddEOS)
		})
	}
	chat := TinyVocab(true)
	for _, tok := range []string{ImStart, ImEnd} {
		id, ok := chat.ID(tok)
		require.True(t, ok)
		assert.Equal(t, TokenControl, chat.Types[id])
	}
	assert.Contains(t, chat.ChatTemplate, "<|im_start|>")
	_, ok := TinyVocab(false).ID(ImStart)
	assert.False(t, ok)
	assert.Empty(t, TinyVocab(false).ChatTemplate)
}

func TestTokenizeHandComputed(t *testing.T) {
	v := TinyVocab(true)
	cases := []struct {
		text string
		want []string
	}{
		{"the model", []string{"▁the", "▁model"}},
		// "▁Hello" is no piece; the longest reachable prefix is "▁He".
		{"Hello world", []string{"▁He", "l", "l", "o", "▁world"}},
		// "é" is no piece: its two UTF-8 bytes fall back to byte tokens.
		{"héllo", []string{"▁h", "<0xC3>", "<0xA9>", "l", "l", "o"}},
		{"a  b", []string{"▁a", "▁", "▁b"}},
		{"go!\n", []string{"▁go", "!", "<0x0A>"}},
		{" ", []string{"▁", "▁"}},
		{"<s>", []string{"▁", "<", "s", ">"}},
		// As in llama.cpp, a symbol's length comes from its lead byte, so an
		// invalid 0xFF swallows the next three bytes (here the escaped space).
		{"\xff x", []string{"▁", "<0xFF>", "<0xE2>", "<0x96>", "<0x81>", "x"}},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, pieces(v, v.Tokenize(c.text, false)), c.text)
	}
	assert.Equal(t, []int32{BOS}, v.Tokenize("", true))
	assert.Empty(t, v.Tokenize("", false))
	ids := v.Tokenize("the", true)
	assert.Equal(t, BOS, ids[0])
}

// TestTokenizeRoundTrip: any text, including non-ASCII, control characters and
// runs of spaces, survives tokenization and detokenization.
func TestTokenizeRoundTrip(t *testing.T) {
	v := TinyVocab(true)
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "e", "t", "h", " ", "  ", "The", "model", ".", ",", "\n", "\t", "é", "日本", "🦙", "▁", "\x00"}
	for range 500 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := sb.String()
		ids := v.Tokenize(s, false)
		require.Equal(t, strings.ReplaceAll(s, "▁", " "), v.Detokenize(ids), "%q -> %v", s, pieces(v, ids))
		withBOS := v.Tokenize(s, true)
		require.Equal(t, append([]int32{BOS}, ids...), withBOS)
		if s != "" {
			// After a BOS the first piece keeps its prefix space.
			require.Equal(t, " "+strings.ReplaceAll(s, "▁", " "), v.Detokenize(withBOS), "%q", s)
		}
	}
}

func TestPiece(t *testing.T) {
	v := TinyVocab(true)
	id, _ := v.ID("▁model")
	assert.Equal(t, " model", v.Piece(id))
	assert.Equal(t, "\n", v.Piece(FirstByte+10))
	assert.Equal(t, "", v.Piece(BOS))
	assert.Equal(t, "", v.Piece(UNK))
	assert.Equal(t, "", v.Piece(-1))
	assert.Equal(t, "", v.Piece(int32(v.Size())))
	im, _ := v.ID(ImEnd)
	assert.Equal(t, "", v.Piece(im))
}

func TestBenchVocab(t *testing.T) {
	v, err := BenchVocab(32000)
	require.NoError(t, err)
	assert.Equal(t, 32000, v.Size())
	for _, p := range []string{"▁q", "▁zz", "▁zzz", "▁aaaa"} {
		_, ok := v.ID(p)
		assert.True(t, ok, p)
	}
	assert.Equal(t, []string{"▁the", "▁model"}, pieces(v, v.Tokenize("the model", false)))
	// Generated pieces make up words of the vocabulary's shapes.
	assert.Equal(t, []string{"▁zyx", "q"}, pieces(v, v.Tokenize("zyxq", false)))
	_, err = BenchVocab(100)
	assert.Error(t, err)
}
