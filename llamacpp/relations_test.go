package llamacpp_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// skipPerClassLayout skips a test that reads the pinned layout of
// llama-model.cpp (one switch over architectures per stage) when the
// sources have the later one (a class per architecture in src/models): its
// tables (blockZeroTensors, moeGating, the rwkv6 rules) are the pinned
// ones, not yet derived from that layout.
func skipPerClassLayout(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(llamaSource(t), "src", "models", "models.h")); err == nil &&
		strings.Contains(string(b), "public llama_model_base") {
		t.Skip("llama.cpp's per-class layout (src/models/models.h): this derivation reads the pinned layout only")
	}
}

// builderSources returns the sources of the pinned graph builders by
// constructor (llm_build_x, with what its file holds) and the
// architectures build_graph makes each for, by architecture name.
func builderSources(t *testing.T) (src map[string]string, archs map[string][]string) {
	t.Helper()
	skipPerClassLayout(t)
	arch := readLlama(t, "src/llama-arch.cpp")
	archName := map[string]string{}
	for _, m := range regexp.MustCompile(`\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(arch, -1) {
		archName[m[1]] = m[2]
	}
	src = map[string]string{}
	files, err := filepath.Glob(filepath.Join(llamaSource(t), "src", "models", "*.cpp"))
	require.NoError(t, err)
	ctor := regexp.MustCompile(`(llm_build_\w+)(?:<[^>]*>)?::llm_build_\w+\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range ctor.FindAllStringSubmatch(string(b), -1) {
			src[m[1]] += string(b)
		}
	}
	archs = map[string][]string{}
	labels, bodies := caseBlocks(function(t, readLlama(t, "src/llama-model.cpp"), "ggml_cgraph * llama_model::build_graph"))
	for i, body := range bodies {
		for _, m := range regexp.MustCompile(`make_unique<(llm_build_\w+)`).FindAllStringSubmatch(body, -1) {
			for _, l := range labels[i] {
				archs[m[1]] = append(archs[m[1]], archName[l])
			}
		}
	}
	return src, archs
}

// TestBlockZeroTensorsMatchLlamaCpp derives from the graph builders the
// tensors a block without its own takes from block 0
// (model.layers[il].x ? model.layers[il].x : model.layers[0].x) and their
// names from the loaders; the validation must require exactly those.
func TestBlockZeroTensorsMatchLlamaCpp(t *testing.T) {
	model := readLlama(t, "src/llama-model.cpp")
	names := tensorNames(t)
	fallback := regexp.MustCompile(`model\.layers\[il\]\.(\w+)\s*\?\s*model\.layers\[il\]\.(\w+)\s*:\s*model\.layers\[0\]\.(\w+)`)
	src, archs := builderSources(t)
	want := map[string][]string{}
	for b, s := range src {
		for _, m := range fallback.FindAllStringSubmatch(s, -1) {
			require.True(t, m[1] == m[2] && m[2] == m[3], m[0])
			// The loader's tensor of the field.
			lm := regexp.MustCompile(`layer\.` + m[1] + `\s*=\s*create_tensor\(tn\((LLM_TENSOR_\w+),\s*"(\w+)"`).FindStringSubmatch(model)
			require.NotNil(t, lm, "loader of %s", m[1])
			name := strings.Replace(names[lm[1]], "%d", "0", 1) + "." + lm[2]
			for _, a := range archs[b] {
				want[a] = append(want[a], name)
			}
		}
	}
	require.NotEmpty(t, want)
	got := llamacpp.BlockZeroTensors()
	assert.Equal(t, len(want), len(got))
	for a, ns := range want {
		assert.ElementsMatch(t, ns, got[a], a)
	}
}

// tensorNames returns LLM_TENSOR_NAMES of llama-arch.cpp.
func tensorNames(t *testing.T) map[string]string {
	src := readLlama(t, "src/llama-arch.cpp")
	i := strings.Index(src, "LLM_TENSOR_NAMES = {")
	require.Positive(t, i)
	block := src[i : i+strings.Index(src[i:], "};")]
	names := map[string]string{}
	for _, m := range regexp.MustCompile(`\{\s*(LLM_TENSOR_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(block, -1) {
		names[m[1]] = m[2]
	}
	return names
}

// TestMoEGatingMatchesLlamaCpp derives the architectures whose builders
// gate experts with the file's expert_gating_func, and whether their
// load_hparams replaces none (0) by a default; lfm2's builder is also
// lfm2moe's, and only lfm2moe has experts.
func TestMoEGatingMatchesLlamaCpp(t *testing.T) {
	src, archs := builderSources(t)
	want := map[string]bool{}
	for b, s := range src {
		if strings.Contains(s, "llama_expert_gating_func_type>(hparams.expert_gating_func)") ||
			strings.Contains(s, "(llama_expert_gating_func_type) hparams.expert_gating_func") {
			for _, a := range archs[b] {
				if a != "lfm2" {
					want[a] = false
				}
			}
		}
	}
	archName := map[string]string{}
	for _, m := range regexp.MustCompile(`\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(readLlama(t, "src/llama-arch.cpp"), -1) {
		archName[m[1]] = m[2]
	}
	labels, bodies := caseBlocks(function(t, readLlama(t, "src/llama-model.cpp"), "void llama_model::load_hparams"))
	for i, body := range bodies {
		if strings.Contains(body, "expert_gating_func == LLAMA_EXPERT_GATING_FUNC_TYPE_NONE") {
			for _, l := range labels[i] {
				if _, ok := want[archName[l]]; ok {
					want[archName[l]] = true
				}
			}
		}
	}
	assert.Equal(t, want, llamacpp.MoEGating())
}

// TestOptionalTensorRulesInLlamaCpp: the source lines that make rwkv6's
// and rwkv6qwen2's optional tensors necessary (optionalTensors) are in the
// pinned llama.cpp: a block without the fused interpolation adds the five
// separate ones, which the loader takes as optional; a block with
// time_mix_first normalizes by time_mix_ln, which rwkv6qwen2's loader
// never loads.
func TestOptionalTensorRulesInLlamaCpp(t *testing.T) {
	skipPerClassLayout(t)
	base := readLlama(t, "src/models/rwkv6-base.cpp")
	for _, s := range []string{"if (layer.time_mix_lerp_fused) {", "bool is_qrwkv = layer.time_mix_first == nullptr;",
		"ggml_mul(ctx0, cur, layer.time_mix_ln)"} {
		assert.Contains(t, base, s)
	}
	for _, n := range []string{"w", "k", "v", "r", "g"} {
		assert.Contains(t, base, "layer.time_mix_lerp_"+n+"), sx), cur)")
	}
	labels, bodies := caseBlocks(function(t, readLlama(t, "src/llama-model.cpp"), "bool llama_model::load_tensors"))
	found := 0
	for i, body := range bodies {
		for _, l := range labels[i] {
			switch l {
			case "LLM_ARCH_RWKV6":
				found++
				for _, n := range []string{"W", "K", "V", "R", "G", "FUSED"} {
					assert.Regexp(t, `LLM_TENSOR_TIME_MIX_LERP_`+n+`, "weight", i\), [^;]*TENSOR_NOT_REQUIRED\)`, body)
				}
			case "LLM_ARCH_RWKV6QWEN2":
				found++
				assert.Regexp(t, `LLM_TENSOR_TIME_MIX_FIRST, "weight", i\), [^;]*TENSOR_NOT_REQUIRED\)`, body)
				assert.NotContains(t, body, "LLM_TENSOR_TIME_MIX_LN")
			}
		}
	}
	assert.Equal(t, 2, found)
}
