//go:build !llamacpp_external

package main

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
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
		{[]string{"--mmproj", mmproj, "--image", pngPath, "--num-beams", "2"}, 2, "beam search"},
		// gemma3's 16 image embeddings attend both ways: one micro-batch
		{[]string{"--mmproj", mmproj, "--image", pngPath, "--ubatch", "8"}, 1, "over the backend's bound of 8"},
	} {
		res := run(t, "", append(args, c.args...)...)
		assert.Equal(t, c.code, res.Code, "%v: %s", c.args, res.Stderr)
		assert.Contains(t, res.Stderr, c.msg, "%v", c.args)
	}
}
