package scripted

import (
	"context"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pieces of Spell are exactly the text, control tokens and bytes
// included; Tokenize reads control tokens only with parseSpecial.
func TestSpellAndTokenize(t *testing.T) {
	tok, _, err := Demo(1, 0)
	require.NoError(t, err)
	for _, text := range []string{"", "The model", ` <tool_call>{"name": "f"}</tool_call>`, "é€😀 x", "a<|im_end|>b"} {
		toks := tok.Spell(text)
		assert.Equal(t, text, tok.Text(toks), "%q", text)
	}
	imEnd, ok := tok.Vocab.ID(testmodel.ImEnd)
	require.True(t, ok)
	assert.Contains(t, tok.Spell("a<|im_end|>"), imEnd)

	toks, err := tok.Tokenize("Hi<|im_end|>", true, true)
	require.NoError(t, err)
	assert.Equal(t, testmodel.BOS, toks[0])
	assert.Equal(t, imEnd, toks[len(toks)-1])
	assert.Equal(t, tok.Vocab.Tokenize("Hi", false), toks[1:len(toks)-1])
	toks, err = tok.Tokenize("Hi<|im_end|>", false, false)
	require.NoError(t, err)
	assert.NotContains(t, toks, imEnd)
	assert.Equal(t, " Hi<|im_end|>", tok.Text(toks))
	assert.True(t, tok.IsEOG(imEnd))
	assert.True(t, tok.IsEOG(testmodel.EOS))
	assert.False(t, tok.IsEOG(testmodel.BOS))
}

// A model that Says a text writes it, then ends, at any temperature; the
// prompt it sees is the request's.
func TestSaysThroughEngine(t *testing.T) {
	tok, m, err := Demo(2, 64)
	require.NoError(t, err)
	var prompts []string
	m.SetScript(tok.Replies(func(prompt string) string {
		prompts = append(prompts, prompt)
		return "héllo <tool_call>"
	}))
	e, err := NewEngine(m, tok)
	require.NoError(t, err)
	defer e.Close()
	cfg := genconfig.Default()
	cfg.DoSample, cfg.Temperature = true, 1.5
	for _, seed := range []uint64{1, 2} {
		task, err := e.Submit(context.Background(), generation.Request{Text: "The model", Config: cfg, Seed: seed})
		require.NoError(t, err)
		var out []int32
		var finish generation.FinishReason
		for ev := range task.Events() {
			if ev.Token >= 0 {
				out = append(out, ev.Token)
			}
			finish = ev.Finish
		}
		assert.Equal(t, "héllo <tool_call>", tok.Text(out[:len(out)-1]))
		assert.Equal(t, testmodel.EOS, out[len(out)-1])
		assert.Equal(t, generation.FinishEOS, finish)
	}
	assert.Equal(t, []string{"<s> The model"}, prompts, "one prompt text, asked once")
	assert.Equal(t, 64, m.Room(0), "the slots are cleared")
}
