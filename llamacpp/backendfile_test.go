package llamacpp_test

import (
	"errors"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/fakebackend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBackend builds a library shaped like a ggml backend into dir
// (fakebackend.Build) and returns its path; the test is skipped without a
// C compiler.
func fakeBackend(t *testing.T, dir string) string {
	t.Helper()
	lib, err := fakebackend.Build(dir)
	if errors.Is(err, fakebackend.ErrNoCompiler) {
		t.Skip(err)
	}
	require.NoError(t, err)
	return lib
}

// The check refuses each damaged library with its reason and passes the
// intact one.
func TestCheckBackendLibrary(t *testing.T) {
	require.NoError(t, llamacpp.CheckBackendLibrary(fakeBackend(t, t.TempDir())))
	for _, c := range fakebackend.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			lib := fakeBackend(t, dir)
			require.NoError(t, c.Damage(dir, lib))
			err := llamacpp.CheckBackendLibrary(lib)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.Reason)
			t.Log(err)
		})
	}
}
