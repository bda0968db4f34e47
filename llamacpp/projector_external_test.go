//go:build llamacpp_external

package llamacpp_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An installed llama.cpp carries no libmtmd: a projector is refused with
// the reason, before its file is read (the projector tests, which need
// the library, build with the pinned module only).
func TestProjectorNeedsTheModuleEngine(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	path := filepath.Join(t.TempDir(), "tiny-gemma3.mmproj.gguf")
	require.NoError(t, testmodel.TinyGemma3Projector().Write(path))
	p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: 1})
	require.Error(t, err)
	assert.Nil(t, p)
	assert.True(t, errors.Is(err, llamacpp.ErrProjector), "%v", err)
	assert.ErrorContains(t, err, "no multimodal library (libmtmd)")
}
