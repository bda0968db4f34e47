package llamacpp_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mutationsEnv sets how many mutated files TestRandomMutations tries (a
// campaign: LLAMALOOP_MUTATIONS=3000 go test -run TestRandomMutations -v);
// an ordinary run tries a few dozen.
const mutationsEnv = "LLAMALOOP_MUTATIONS"

// mutationsDirEnv names a directory that keeps every mutated file and an
// index of their families (families.txt), so that a campaign can be
// repeated on another build; by default a file that did not crash is
// removed once tried.
const mutationsDirEnv = "LLAMALOOP_MUTATIONS_DIR"

var mutatedPath = regexp.MustCompile(`\S+/m\d+\.gguf:`)

// mutate returns a copy of data changed as a hostile or damaged file would
// be: bits flipped in the header, a header field overwritten with an extreme
// number, a truncation, or bits flipped anywhere (tensor data included).
func mutate(rng *rand.Rand, data []byte, header int) ([]byte, string) {
	b := append([]byte(nil), data...)
	extremes := []uint64{0, 1, 2, 0x7f, 0xff, 0x7fffffff, 0x80000000, 0xffffffff, 1 << 32, 1<<62 + 1, ^uint64(0)}
	switch k := rng.IntN(10); {
	case k < 5:
		n := 1 + rng.IntN(4)
		for range n {
			i := rng.IntN(header)
			b[i] ^= 1 << rng.IntN(8)
		}
		return b, "header bits"
	case k < 8:
		i := rng.IntN(header - 8)
		binary.LittleEndian.PutUint64(b[i:], extremes[rng.IntN(len(extremes))])
		return b, "header field"
	case k < 9:
		return b[:rng.IntN(len(b))], "truncation"
	}
	for range 1 + rng.IntN(16) {
		i := rng.IntN(len(b))
		b[i] ^= 1 << rng.IntN(8)
	}
	return b, "bits anywhere"
}

// TestRandomMutations exercises mutated copies of two small models, each in
// a child process (load, tokenize, every piece, a context and a decode):
// byte-level damage of the mini model (bits flipped, fields overwritten,
// truncation) and, for four files in five, structure-aware edits of a
// two-layer model (structFamilies: well-formed files with hostile
// hyperparameters, tensor types and shapes, architecture names and
// vocabularies). None may crash the process, none may make it allocate more
// than 512 MB (peak RSS of the child; the files are a few MB), and every
// refusal must be a clear error (llamacpp's, of a few hundred bytes at most:
// a corrupt length must not pour the file into the message), wrapping
// ErrLoad when the load refuses. It logs the counts per family.
func TestRandomMutations(t *testing.T) {
	if asan.Enabled {
		t.Skip("a child per file under AddressSanitizer is too slow; make test runs it")
	}
	n := 40
	if s := os.Getenv(mutationsEnv); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, mutationsEnv)
		n = v
	}
	data, header, structSrc := mutationSources(t)
	require.Equal(t, "ok", runChild(t, structSrc, false).result, "the unmutated model")
	base := readParts(t, structSrc)

	type outcome struct {
		kind, result string
		crashed      bool
		rss          int64
		file         string
	}
	dir := t.TempDir()
	if d := os.Getenv(mutationsDirEnv); d != "" {
		dir = d
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range n {
		path := filepath.Join(dir, "m"+strconv.Itoa(i)+".gguf")
		kind := writeMutation(t, i, data, header, base, path)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			run := runChild(t, path, false)
			outcomes[i] = outcome{kind: kind, result: run.result, crashed: run.crashed, rss: run.maxRSS, file: path}
			if run.crashed {
				outcomes[i].result = crashCause(run.output)
			} else if os.Getenv(mutationsDirEnv) == "" {
				os.Remove(path) // a campaign's files are many MB each
			}
		}()
	}
	wg.Wait()
	if d := os.Getenv(mutationsDirEnv); d != "" {
		var index strings.Builder
		for _, o := range outcomes {
			fmt.Fprintf(&index, "%s\t%s\n", filepath.Base(o.file), o.kind)
		}
		require.NoError(t, os.WriteFile(filepath.Join(d, "families.txt"), []byte(index.String()), 0o644))
	}

	type tally struct{ files, refused, later, ran, crashed, blewUp, unclear int }
	families := map[string]*tally{}
	messages := map[string]int{}
	var peak int64
	for _, o := range outcomes {
		peak = max(peak, o.rss)
		f := families[o.kind]
		if f == nil {
			f = &tally{}
			families[o.kind] = f
		}
		f.files++
		switch {
		case o.crashed:
			f.crashed++
			t.Errorf("%s (%s) crashed the child:\n%s", o.file, o.kind, o.result)
		case o.rss > childRSSBound:
			f.blewUp++
			t.Errorf("%s (%s): peak RSS %d MB", o.file, o.kind, o.rss>>20)
		case o.result == "ok":
			f.ran++
		case len(o.result) > 400 || !strings.Contains(o.result, "llamacpp: "):
			f.unclear++
			t.Errorf("%s (%s): unclear error %.600s", o.file, o.kind, o.result)
		case strings.HasPrefix(o.result, "error: "):
			f.refused++
			messages[firstWords(strings.TrimPrefix(o.result, "error: "))]++
		default:
			f.later++
			messages[firstWords(o.result)]++
		}
	}
	names := make([]string, 0, len(families))
	for k := range families {
		names = append(names, k)
	}
	sort.Strings(names)
	var total tally
	t.Logf("%d mutated files; peak RSS of a child %d MB", n, peak>>20)
	t.Logf("%-18s %6s %8s %6s %5s %8s %8s", "family", "files", "refused", "later", "ran", "crashed", ">512MB")
	for _, k := range names {
		f := families[k]
		t.Logf("%-18s %6d %8d %6d %5d %8d %8d", k, f.files, f.refused, f.later, f.ran, f.crashed, f.blewUp)
		total.files += f.files
		total.refused += f.refused
		total.later += f.later
		total.ran += f.ran
		total.crashed += f.crashed
		total.blewUp += f.blewUp
		total.unclear += f.unclear
	}
	t.Logf("%-18s %6d %8d %6d %5d %8d %8d", "all", total.files, total.refused, total.later, total.ran, total.crashed, total.blewUp)
	assert.Zero(t, total.crashed)
	assert.Zero(t, total.blewUp)
	assert.Zero(t, total.unclear)
	kinds := make([]string, 0, len(messages))
	for m := range messages {
		kinds = append(kinds, m)
	}
	sort.Slice(kinds, func(i, j int) bool { return messages[kinds[i]] > messages[kinds[j]] })
	for _, m := range kinds {
		t.Logf("%5d  %s", messages[m], m)
	}
}

// writeMutation writes mutated file i of a campaign to path and returns its
// family: for one file in five a byte-level mutation of the mini model
// (data, whose header is its first header bytes), else structure-aware
// edits of base. The same i gives the same file.
func writeMutation(t testing.TB, i int, data []byte, header int, base *parts, path string) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(i), 26))
	if i%5 != 0 {
		return structMutate(rng, base, path)
	}
	b, kind := mutate(rng, data, header)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return kind
}

// mutationsOutEnv names a directory where TestWriteMutations writes the
// files of a campaign (LLAMALOOP_MUTATIONS of them, files m0.gguf ... and
// families.txt) without trying them: internal/cmd/campaign runs each in a
// child under its own memory limit and timeout (TestExerciseChild).
const mutationsOutEnv = "LLAMALOOP_MUTATIONS_OUT"

// mutationSources writes what the random mutations start from: the mini
// model's bytes and the offset of its tensor data (for byte mutations),
// and the structured model's file (for structure-aware ones).
func mutationSources(t *testing.T) (data []byte, header int, structSrc string) {
	t.Helper()
	loadArchNames(t)
	src := miniModel(t)
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	r, err := gguf.Open(src)
	require.NoError(t, err)
	header = int(r.DataOffset)
	r.Close()
	structSrc = filepath.Join(t.TempDir(), "struct.gguf")
	require.NoError(t, writeStruct(structSrc))
	return data, header, structSrc
}

// TestWriteMutations writes the mutated files of TestRandomMutations for a
// campaign; it is skipped in an ordinary run.
func TestWriteMutations(t *testing.T) {
	dir := os.Getenv(mutationsOutEnv)
	if dir == "" {
		t.Skip("writes a campaign's files when " + mutationsOutEnv + " names a directory")
	}
	n, err := strconv.Atoi(os.Getenv(mutationsEnv))
	require.NoError(t, err, mutationsEnv)
	data, header, structSrc := mutationSources(t)
	base := readParts(t, structSrc)
	var index strings.Builder
	for i := range n {
		name := "m" + strconv.Itoa(i) + ".gguf"
		fmt.Fprintf(&index, "%s\t%s\n", name, writeMutation(t, i, data, header, base, filepath.Join(dir, name)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "families.txt"), []byte(index.String()), 0o644))
}

// crashCause picks from a crashed child's output the lines that say why
// (llama.cpp's assertion, the signal), or its tail.
func crashCause(out string) string {
	var why []string
	for _, line := range strings.Split(out, "\n") {
		for _, s := range []string{"GGML_ASSERT", "GGML_ABORT", "error", "SIG", "what()", "terminate", "panic", "unsupported", "fatal"} {
			if strings.Contains(line, s) {
				why = append(why, line)
				break
			}
		}
	}
	if len(why) == 0 {
		return tail(out, 2000)
	}
	return strings.Join(why[:min(8, len(why))], "\n")
}

// firstWords is the start of an error message without the file's path,
// enough to group errors of one kind: its first 14 words.
func firstWords(s string) string {
	w := strings.Fields(mutatedPath.ReplaceAllString(s, "FILE:"))
	return strings.Join(w[:min(14, len(w))], " ")
}
