package testmodel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mtmdSource reads a file of the pinned module's tools/mtmd.
func mtmdSource(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ollama/ollama").Output()
	require.NoError(t, err, "go list the ollama module")
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "llama", "llama.cpp", "tools", "mtmd", name))
	require.NoError(t, err)
	return string(b)
}

// clipRequirements derives from clip.cpp's loader what it requires of a
// file of projector type typ and modality prefix ("v" or "a") with nLayer
// blocks: the keys read without a default (get_*(key, dst) with no third
// argument, and image_mean/std, which it asserts) and the tensors read
// with get_tensor(name) without "false", generic or in typ's case of
// load_tensors' switch.
func clipRequirements(t *testing.T, typ, prefix string, nLayer int) (keys, tensors []string) {
	impl, clip := mtmdSource(t, "clip-impl.h"), mtmdSource(t, "clip.cpp")
	macros := map[string]string{}
	for _, m := range regexp.MustCompile(`#define\s+((?:KEY|TN)_\w+)\s+"([^"]*)"`).FindAllStringSubmatch(impl, -1) {
		macros[m[1]] = m[2]
	}
	enum := ""
	for _, m := range regexp.MustCompile(`\{\s*(PROJECTOR_TYPE_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(impl, -1) {
		if m[2] == typ {
			enum = m[1]
		}
	}
	require.NotEmpty(t, enum, "projector type %q in clip-impl.h", typ)
	modality := map[string]string{"v": "vision", "a": "audio"}[prefix]

	// eval evaluates a name expression: MACRO or string_format(MACRO, args).
	eval := func(expr string, il int) (string, bool) {
		expr = strings.TrimSpace(expr)
		if v, ok := macros[expr]; ok {
			return v, true
		}
		m := regexp.MustCompile(`^string_format\((\w+)\s*,(.*)\)$`).FindStringSubmatch(expr)
		if m == nil {
			return "", false
		}
		format, ok := macros[m[1]]
		if !ok {
			return "", false
		}
		var args []any
		for _, a := range strings.Split(m[2], ",") {
			switch a = strings.TrimSpace(a); {
			case a == "prefix" && strings.HasPrefix(m[1], "KEY_"):
				args = append(args, modality)
			case a == "prefix":
				args = append(args, prefix)
			case a == "il":
				args = append(args, il)
			case strings.HasPrefix(a, `"`):
				args = append(args, strings.Trim(a, `"`))
			default:
				n, err := strconv.Atoi(a)
				if err != nil {
					return "", false
				}
				args = append(args, n)
			}
		}
		return fmt.Sprintf(format, args...), true
	}

	hp := clip[strings.Index(clip, "void load_hparams("):strings.Index(clip, "void load_tensors(")]
	for _, m := range regexp.MustCompile(`get_(?:u32|i32|f32|bool|string|arr_int)\(((?:string_format\([^()]*\))|\w+)\s*,\s*[\w.]+\)`).FindAllStringSubmatch(hp, -1) {
		k, ok := eval(m[1], 0)
		require.True(t, ok, "key expression %s", m[1])
		if strings.Contains(k, ".vision.") && prefix != "v" || strings.Contains(k, ".audio.") && prefix != "a" {
			continue
		}
		keys = append(keys, k)
	}
	if prefix == "v" {
		for _, m := range regexp.MustCompile(`GGML_ASSERT\((idx_mean|idx_std) >= 0`).FindAllStringSubmatch(hp, -1) {
			keys = append(keys, map[string]string{"idx_mean": macros["KEY_IMAGE_MEAN"], "idx_std": macros["KEY_IMAGE_STD"]}[m[1]])
		}
	}

	lt := clip[strings.Index(clip, "void load_tensors("):]
	lt = lt[:strings.Index(lt, "\n    }\n")]
	sw := strings.Index(lt, "switch (model.proj_type)")
	require.Positive(t, sw, "load_tensors' switch over projector types")
	required := regexp.MustCompile(`get_tensor\(((?:string_format\([^()]*\))|\w+)\)`)
	addAll := func(code string, perLayer bool) {
		for _, m := range required.FindAllStringSubmatch(code, -1) {
			for il := range nLayer {
				name, ok := eval(m[1], il)
				require.True(t, ok, "tensor expression %s", m[1])
				tensors = append(tensors, name)
				if !perLayer {
					break
				}
			}
		}
	}
	generic := lt[:sw]
	layers := strings.Index(generic, "for (int il = 0; il < hparams.n_layer; ++il)")
	require.Positive(t, layers)
	addAll(generic[:layers], false)
	addAll(generic[layers:], true)
	// typ's block: from its case label to the next block's break
	cases := lt[sw:]
	i := strings.Index(cases, "case "+enum+":")
	require.Positive(t, i, "%s in load_tensors", enum)
	block := cases[i:]
	block = block[:strings.Index(block, "} break;")]
	addAll(block, false)
	return keys, tensors
}

// The projector files carry every key and tensor clip.cpp's loader
// requires of their type (derived from the pinned clip.cpp, so a new
// requirement there fails here).
func TestProjectorsCarryClipRequirements(t *testing.T) {
	for _, tc := range []struct {
		name, typ, prefix string
		nLayer            int
		model             Model
		must              string // a derived requirement proving the parse
	}{
		{"gemma3", ProjectorGemma3, "v", 2, TinyGemma3Projector(), "mm.input_projection.weight"},
		{"qwen2vl", ProjectorQwen2VL, "v", 2, TinyQwen2VLProjector(), "mm.2.bias"},
		{"qwen2a", ProjectorQwen2Audio, "a", 2, TinyQwen2AudioProjector(), "mm.a.fc.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, tensors := clipRequirements(t, tc.typ, tc.prefix, tc.nLayer)
			assert.Contains(t, tensors, tc.must)
			assert.Contains(t, tensors, tc.prefix+".blk.1.ffn_down.weight")
			assert.Contains(t, keys, "clip."+map[string]string{"v": "vision", "a": "audio"}[tc.prefix]+".embedding_length")
			path := filepath.Join(t.TempDir(), tc.name+".gguf")
			require.NoError(t, tc.model.Write(path))
			r, err := gguf.Open(path)
			require.NoError(t, err)
			defer r.Close()
			for _, k := range keys {
				_, ok := r.Lookup(k)
				assert.True(t, ok, "key %s", k)
			}
			for _, n := range tensors {
				_, ok := r.Tensor(n)
				assert.True(t, ok, "tensor %s", n)
			}
			t.Logf("%d keys, %d tensors required", len(keys), len(tensors))
		})
	}
}
