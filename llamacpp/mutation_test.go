package llamacpp_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/internal/asan"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mutationsEnv sets how many mutated files TestRandomMutations tries (a
// campaign: LLAMALOOP_MUTATIONS=3000 go test -run TestRandomMutations -v);
// an ordinary run tries a few dozen.
const mutationsEnv = "LLAMALOOP_MUTATIONS"

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

// TestRandomMutations exercises randomly mutated copies of the mini model,
// each in a child process (load, tokenize, every piece, a context and a
// decode): none may crash the process, none may make it allocate more than
// a file of its size justifies (1 GiB of peak RSS), and every refusal must
// be a clear error (llamacpp's, of a few hundred bytes at most: a corrupt
// length must not pour the file into the message), wrapping ErrLoad when
// the load refuses. It logs the
// counts that the issue asks for.
func TestRandomMutations(t *testing.T) {
	if asan.Enabled {
		t.Skip("a child per file under AddressSanitizer is too slow; make test runs it")
	}
	n := 24
	if s := os.Getenv(mutationsEnv); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, mutationsEnv)
		n = v
	}
	src := miniModel(t)
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	r, err := gguf.Open(src)
	require.NoError(t, err)
	header := int(r.DataOffset)
	r.Close()

	type outcome struct {
		kind, result string
		crashed      bool
		rss          int64
		file         string
	}
	dir := t.TempDir()
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 14))
		b, kind := mutate(rng, data, header)
		path := filepath.Join(dir, "m"+strconv.Itoa(i)+".gguf")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			run := runChild(t, path, false)
			outcomes[i] = outcome{kind: kind, result: run.result, crashed: run.crashed, rss: run.maxRSS, file: path}
			if run.crashed {
				outcomes[i].result = tail(run.output, 2000)
			}
		}()
	}
	wg.Wait()

	counts := map[string]int{}
	messages := map[string]int{}
	var peak int64
	for _, o := range outcomes {
		peak = max(peak, o.rss)
		switch {
		case o.crashed:
			counts["crashed"]++
			t.Errorf("%s (%s) crashed the child:\n%s", o.file, o.kind, o.result)
		case o.rss > 1<<30:
			counts["blew up"]++
			t.Errorf("%s (%s): peak RSS %d MB", o.file, o.kind, o.rss>>20)
		case o.result == "ok":
			counts["loaded and decoded"]++
		case len(o.result) > 400 || !strings.Contains(o.result, "llamacpp: "):
			counts["unclear error"]++
			t.Errorf("%s (%s): unclear error %.600s", o.file, o.kind, o.result)
		case strings.HasPrefix(o.result, "error: "):
			counts["refused with ErrLoad"]++
			messages[firstWords(strings.TrimPrefix(o.result, "error: "))]++
		default:
			counts["later error"]++
			messages[firstWords(o.result)]++
		}
	}
	assert.Zero(t, counts["crashed"])
	assert.Zero(t, counts["blew up"])
	assert.Zero(t, counts["unclear error"])
	t.Logf("%d mutated files: %v; peak RSS of a child %d MB", n, counts, peak>>20)
	kinds := make([]string, 0, len(messages))
	for m := range messages {
		kinds = append(kinds, m)
	}
	sort.Slice(kinds, func(i, j int) bool { return messages[kinds[i]] > messages[kinds[j]] })
	for _, m := range kinds {
		t.Logf("%5d  %s", messages[m], m)
	}
}

// firstWords is the start of an error message without the file's path,
// enough to group errors of one kind: its first 9 words.
func firstWords(s string) string {
	w := strings.Fields(mutatedPath.ReplaceAllString(s, "FILE:"))
	return strings.Join(w[:min(9, len(w))], " ")
}
