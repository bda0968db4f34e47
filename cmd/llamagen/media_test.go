//go:build !llamacpp_external

package main

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resultTokens is the tokens of llamagen --json's result line.
func resultTokens(t *testing.T, stdout string) []int32 {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		var r struct {
			Type   string  `json:"type"`
			Tokens []int32 `json:"tokens"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Type == "result" {
			return r.Tokens
		}
	}
	t.Fatalf("no result line in %q", stdout)
	return nil
}

func TestImageOption(t *testing.T) {
	dir := t.TempDir()
	mmproj := filepath.Join(dir, "mmproj.gguf")
	require.NoError(t, testmodel.TinyGemma3Projector().Write(mmproj))
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			img.Set(x, y, color.RGBA{uint8(x * 8), uint8(y * 8), 100, 255})
		}
	}
	pngPath := filepath.Join(dir, "img.png")
	f, err := os.Create(pngPath)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())

	args := []string{"-m", tinyModel, "-p", "look " + mediaMarker + " now", "--max-new-tokens", "8", "--json"}
	with := run(t, "", append(args, "--mmproj", mmproj, "--image", pngPath)...)
	require.Equal(t, 0, with.Code, with.Stderr)
	again := run(t, "", append(args, "--mmproj", mmproj, "--image", pngPath)...)
	without := run(t, "", args...)
	require.Equal(t, 0, without.Code, without.Stderr)
	assert.Equal(t, resultTokens(t, with.Stdout), resultTokens(t, again.Stdout))
	assert.NotEqual(t, resultTokens(t, without.Stdout), resultTokens(t, with.Stdout), "the image changes the reply")

	// Beam search takes the image too: its best hypothesis is not the
	// text-only search's.
	beams := []string{"--num-beams", "3", "--quiet"}
	withBeams := run(t, "", append(append(args, "--mmproj", mmproj, "--image", pngPath), beams...)...)
	require.Equal(t, 0, withBeams.Code, withBeams.Stderr)
	withoutBeams := run(t, "", append(args, beams...)...)
	require.Equal(t, 0, withoutBeams.Code, withoutBeams.Stderr)
	rw, ro := ofType(jsonLines(t, withBeams.Stdout), "result"), ofType(jsonLines(t, withoutBeams.Stdout), "result")
	require.Len(t, rw, 1)
	require.Len(t, ro, 1)
	assert.NotEqual(t, ro[0]["score"], rw[0]["score"], "the image changes the search")

	bad := filepath.Join(dir, "bad.png")
	require.NoError(t, os.WriteFile(bad, []byte("not an image"), 0o644))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--image", pngPath}, 2, "need --mmproj"},
		{[]string{"--mmproj", mmproj}, 2, "--mmproj needs --image or --audio"},
		{[]string{"--mmproj", mmproj, "--image", bad}, 1, "PNG, JPEG and GIF are taken"},
		{[]string{"--mmproj", mmproj, "--audio", pngPath}, 1, "not a RIFF WAVE file"},
		{[]string{"--mmproj", tinyModel, "--image", pngPath}, 1, `want "clip"`},
		{[]string{"--mmproj", mmproj, "--image", pngPath, "--assistant-model", tinyModel}, 2, "the draft model cannot read the prompt's image or sound embeddings"},
		// gemma3's 16 image embeddings attend both ways: one micro-batch
		{[]string{"--mmproj", mmproj, "--image", pngPath, "--ubatch", "8"}, 1, "over the backend's bound of 8"},
	} {
		res := run(t, "", append(args, c.args...)...)
		assert.Equal(t, c.code, res.Code, "%v: %s", c.args, res.Stderr)
		assert.Contains(t, res.Stderr, c.msg, "%v", c.args)
	}
}

// An M-RoPE projector (Qwen2-VL's merger) beside its qwen2vl text model:
// the image goes in at its M-RoPE positions (checked against the float64
// reference in llamabackend's tests) and changes the reply, with greedy
// decoding, prompt lookup and beam search.
func TestImageOptionMRoPE(t *testing.T) {
	dir := t.TempDir()
	model, mmproj := filepath.Join(dir, "qwen2vl.gguf"), filepath.Join(dir, "mmproj.gguf")
	require.NoError(t, testmodel.TinyQwen2VLText().Write(model))
	require.NoError(t, testmodel.TinyQwen2VLProjector().Write(mmproj))
	img := image.NewRGBA(image.Rect(0, 0, 40, 24))
	for y := range 24 {
		for x := range 40 {
			img.Set(x, y, color.RGBA{uint8(x * 6), uint8(y * 10), 100, 255})
		}
	}
	pngPath := filepath.Join(dir, "img.png")
	f, err := os.Create(pngPath)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())

	args := []string{"-m", model, "-p", "look " + mediaMarker + " now", "--max-new-tokens", "8", "--json"}
	with := run(t, "", append(args, "--mmproj", mmproj, "--image", pngPath)...)
	require.Equal(t, 0, with.Code, with.Stderr)
	assert.NotContains(t, with.Stderr, "non-causal")
	without := run(t, "", args...)
	require.Equal(t, 0, without.Code, without.Stderr)
	assert.NotEqual(t, resultTokens(t, without.Stdout), resultTokens(t, with.Stdout), "the image changes the reply")

	// Prompt lookup and beam search take the image at its positions:
	// prompt lookup gives greedy decoding's tokens, and three beams search
	// with the image.
	withImg := append(slices.Clone(args), "--mmproj", mmproj, "--image", pngPath, "--quiet")
	lookup := run(t, "", append(withImg, "--prompt-lookup", "3")...)
	require.Equal(t, 0, lookup.Code, lookup.Stderr)
	assert.Equal(t, resultTokens(t, with.Stdout), resultTokens(t, lookup.Stdout))
	beams := []string{"--num-beams", "3", "--quiet"}
	withBeams := run(t, "", append(slices.Clone(withImg), beams...)...)
	require.Equal(t, 0, withBeams.Code, withBeams.Stderr)
	withoutBeams := run(t, "", append(slices.Clone(args), beams...)...)
	require.Equal(t, 0, withoutBeams.Code, withoutBeams.Stderr)
	rw, ro := ofType(jsonLines(t, withBeams.Stdout), "result"), ofType(jsonLines(t, withoutBeams.Stdout), "result")
	require.Len(t, rw, 1)
	require.Len(t, ro, 1)
	assert.NotEqual(t, ro[0]["score"], rw[0]["score"], "the image changes the search")
}
