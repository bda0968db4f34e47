//go:build !llamacpp_external

package llamacpp_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// projMutationsOutEnv names the folder TestWriteProjectorMutations
	// writes a campaign's mutated projector files into.
	projMutationsOutEnv = "LLAMALOOP_MMPROJ_MUTATIONS_OUT"
	// projExerciseEnv names the projector file TestExerciseProjectorChild
	// loads beside tiny-f32 and encodes media with.
	projExerciseEnv = "LLAMALOOP_MMPROJ_EXERCISE_PATH"
)

// projectorSeeds are the unmutated projector files, by name.
var projectorSeeds = []struct {
	name  string
	model testmodel.Model
}{
	{"gemma3", testmodel.TinyGemma3Projector()},
	{"qwen2vl", testmodel.TinyQwen2VLProjector()},
	{"qwen2a", testmodel.TinyQwen2AudioProjector()},
}

// writeProjectorMutation writes mutation i of one of the seed projectors
// (in turn) to path with the generators of the GGUF campaign and returns
// its family: the seed's name and the mutation's kind.
func writeProjectorMutation(t testing.TB, i int, seeds [][]byte, headers []int, path string) string {
	t.Helper()
	s := i % len(projectorSeeds)
	rng := rand.New(rand.NewPCG(uint64(i), 0x39))
	b, kind := mutate(rng, seeds[s], headers[s])
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return projectorSeeds[s].name + ": " + kind
}

// projectorSources writes the seed projectors and returns their bytes and
// the sizes of their headers (the offset of their tensor data).
func projectorSources(t testing.TB) (seeds [][]byte, headers []int) {
	t.Helper()
	dir := t.TempDir()
	for _, s := range projectorSeeds {
		path := filepath.Join(dir, s.name+".gguf")
		require.NoError(t, s.model.Write(path))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		r, err := gguf.Open(path)
		require.NoError(t, err)
		headers = append(headers, int(r.DataOffset))
		r.Close()
		seeds = append(seeds, data)
	}
	return seeds, headers
}

// TestWriteProjectorMutations writes the mutated projector files of a
// campaign (internal/cmd/campaign's mmproj family); it is skipped in an
// ordinary run.
func TestWriteProjectorMutations(t *testing.T) {
	dir := os.Getenv(projMutationsOutEnv)
	if dir == "" {
		t.Skip("writes a campaign's files when " + projMutationsOutEnv + " names a directory")
	}
	n, err := strconv.Atoi(os.Getenv(mutationsEnv))
	require.NoError(t, err, mutationsEnv)
	seeds, headers := projectorSources(t)
	var index strings.Builder
	for i := range n {
		name := "p" + strconv.Itoa(i) + ".gguf"
		fmt.Fprintf(&index, "%s\t%s\n", name, writeProjectorMutation(t, i, seeds, headers, filepath.Join(dir, name)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "families.txt"), []byte(index.String()), 0o644))
}

// exerciseProjector loads the projector at path beside tiny-f32 and
// encodes every medium of a prompt with a 32×32 image or one second of
// sound, whichever the projector takes.
func exerciseProjector(t *testing.T, path string) error {
	m := loadModel(t, "tiny-f32")
	p, err := llamacpp.LoadProjector(path, m, llamacpp.ProjectorParams{Threads: 1})
	if err != nil {
		return err
	}
	defer p.Close()
	var media llamacpp.Media
	if p.Info().Vision {
		media, err = llamacpp.ImageRGB(32, 32, referenceImage(32, 32))
	} else {
		pcm := make([]float32, p.Info().SampleRate)
		for i := range pcm {
			pcm[i] = float32(0.3 * math.Sin(float64(i)*0.07))
		}
		media, err = llamacpp.AudioPCM(pcm, p.Info().SampleRate)
	}
	if err != nil {
		return err
	}
	pr, err := p.Tokenize("x "+p.Info().Marker, []llamacpp.Media{media}, llamacpp.TokenizeOptions{})
	if err != nil {
		return err
	}
	defer pr.Close()
	for i, c := range pr.Chunks {
		if c.Kind != llamacpp.ChunkText {
			if _, err := pr.Encode(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestExerciseProjectorChild is the child process of the projector
// mutation tests: it prints the verdict on the file at projExerciseEnv.
func TestExerciseProjectorChild(t *testing.T) {
	path := os.Getenv(projExerciseEnv)
	if path == "" {
		t.Skip("runs only as the child of a projector mutation test")
	}
	msg := "ok"
	if err := exerciseProjector(t, path); err != nil {
		msg = "error: " + err.Error()
		if !errors.Is(err, llamacpp.ErrProjector) {
			msg = "later " + msg
		}
	}
	fmt.Println(childResult + strings.ReplaceAll(msg, "\n", " "))
}

// Byte-mutated projector files give errors, not signals: a few of the
// campaign's mutations of each seed, each in a child process (make
// campaign runs hundreds).
func TestProjectorByteMutations(t *testing.T) {
	if asan.Enabled {
		t.Skip("a child per file under AddressSanitizer is too slow")
	}
	seeds, headers := projectorSources(t)
	dir := t.TempDir()
	for i := range 9 {
		path := filepath.Join(dir, "p"+strconv.Itoa(i)+".gguf")
		family := writeProjectorMutation(t, i, seeds, headers, path)
		cmd := exec.Command(os.Args[0], "-test.run=^TestExerciseProjectorChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), projExerciseEnv+"="+path)
		out, err := cmd.CombinedOutput()
		verdict := ""
		for _, line := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(line, childResult); ok {
				verdict = s
			}
		}
		require.NoError(t, err, "%s (%s) crashed the child:\n%s", path, family, crashCause(string(out)))
		require.NotEmpty(t, verdict, "%s (%s): no verdict", path, family)
		t.Logf("%s: %.200s", family, verdict)
		assert.True(t, verdict == "ok" || strings.Contains(verdict, "llamacpp: "), "%s: unclear error %.300s", family, verdict)
	}
	// the unmutated seeds load and encode
	for _, s := range projectorSeeds {
		path := filepath.Join(dir, s.name+".gguf")
		require.NoError(t, s.model.Write(path))
		require.NoError(t, exerciseProjector(t, path), s.name)
	}
}
