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

// The validation's tables of llama.cpp's rules are checked against the
// sources of the pinned llama.cpp in the module cache, so that a newer
// llama.cpp with a new architecture, tensor or assertion fails here instead
// of crashing at load.

func readLlama(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(llamaSource(t), rel))
	require.NoError(t, err)
	return string(b)
}

// caseBlocks splits a C++ switch over architectures into its blocks: the
// LLM_ARCH_ labels of consecutive case lines and the code that follows them.
func caseBlocks(src string) (labels [][]string, bodies []string) {
	caseLine := regexp.MustCompile(`^\s*case (LLM_ARCH_\w+):`)
	var body strings.Builder
	last := false
	for _, line := range strings.Split(src, "\n") {
		if m := caseLine.FindStringSubmatch(line); m != nil {
			if !last {
				if labels != nil {
					bodies = append(bodies, body.String())
				}
				labels = append(labels, nil)
				body.Reset()
			}
			labels[len(labels)-1] = append(labels[len(labels)-1], m[1])
			last = true
			continue
		}
		if strings.TrimSpace(line) != "" {
			last = false
		}
		body.WriteString(line + "\n")
	}
	if labels != nil {
		bodies = append(bodies, body.String())
	}
	return labels, bodies
}

// function returns the body of the C++ function whose definition starts
// with head, up to the first closing brace in column 0.
func function(t *testing.T, src, head string) string {
	t.Helper()
	i := strings.Index(src, head)
	require.Positive(t, i, head)
	j := strings.Index(src[i:], "\n}\n")
	require.Positive(t, j, head)
	return src[i : i+j]
}

// TestArchRulesMatchLlamaCpp derives from the pinned llama.cpp, for every
// architecture it builds a graph for, the head-size assertions of its graph
// builders (src/models/*.cpp), whether they apply RoPE, whether its tensor
// loader asserts experts, and whether it takes the output head as optional
// without falling back to the token embedding; the validation's table must
// be the same.
func TestArchRulesMatchLlamaCpp(t *testing.T) {
	want := derivedArchRules(t)
	assert.Equal(t, want, llamacpp.ArchRuleNames())
	assert.Greater(t, len(want), 100, "architectures with a graph")
}

// derivedArchRules is TestArchRulesMatchLlamaCpp's table, derived from the
// engine's sources: the rule names of each architecture with a graph.
func derivedArchRules(t *testing.T) map[string][]string {
	if _, err := os.Stat(filepath.Join(llamaSource(t), "src", "models", "models.h")); err == nil {
		if b, _ := os.ReadFile(filepath.Join(llamaSource(t), "src", "models", "models.h")); strings.Contains(string(b), "struct llama_model_base") ||
			regexp.MustCompile(`struct llama_model_\w+ : public llama_model_base`).Match(b) {
			return derivedArchRulesPerClass(t)
		}
	}
	arch := readLlama(t, "src/llama-arch.cpp")
	archName := map[string]string{}
	for _, m := range regexp.MustCompile(`\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(arch, -1) {
		archName[m[1]] = m[2]
	}
	model := readLlama(t, "src/llama-model.cpp")

	// Builder constructors and what their files assert.
	rules := map[string]map[string]bool{}
	files, err := filepath.Glob(filepath.Join(llamaSource(t), "src", "models", "*.cpp"))
	require.NoError(t, err)
	head := regexp.MustCompile(`const int64_t n_embd_head\s*=\s*hparams\.n_embd_head_([kv])`)
	ctor := regexp.MustCompile(`(llm_build_\w+)(?:<[^>]*>)?::llm_build_\w+\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src := string(b)
		r := map[string]bool{}
		if m := head.FindStringSubmatch(src); m != nil {
			other := map[string]string{"k": "v", "v": "k"}[m[1]]
			if regexp.MustCompile(`(?m)^\s*GGML_ASSERT\(n_embd_head == hparams\.n_embd_head_` + other + `\)`).MatchString(src) {
				r["sameKV"] = true
			}
			if regexp.MustCompile(`(?m)^\s*GGML_ASSERT\(n_embd_head == hparams\.n_rot\)`).MatchString(src) {
				r["rotIs"+strings.ToUpper(m[1])] = true
			}
		}
		if strings.Contains(src, "GGML_ASSERT(hparams.n_embd_v_gqa(il) == hparams.n_embd_k_gqa(il))") {
			r["sameKV"] = true // lfm2: the attention layers' key and value widths
		}
		if strings.Contains(src, "ggml_rope") {
			r["ropes"] = true
		}
		for _, m := range ctor.FindAllStringSubmatch(src, -1) {
			if rules[m[1]] == nil {
				rules[m[1]] = map[string]bool{}
			}
			for k := range r {
				rules[m[1]][k] = true
			}
		}
	}
	derived := map[string]map[string]bool{}
	add := func(label, rule string) {
		name, ok := archName[label]
		require.True(t, ok, label)
		if derived[name] == nil {
			derived[name] = map[string]bool{}
		}
		if rule != "" {
			derived[name][rule] = true
		}
	}
	labels, bodies := caseBlocks(function(t, model, "ggml_cgraph * llama_model::build_graph"))
	for i, body := range bodies {
		for _, m := range regexp.MustCompile(`make_unique<(llm_build_\w+)`).FindAllStringSubmatch(body, -1) {
			r, ok := rules[m[1]]
			require.True(t, ok, "constructor of %s", m[1])
			for _, l := range labels[i] {
				add(l, "")
				for k := range r {
					add(l, k)
				}
			}
		}
	}
	labels, bodies = caseBlocks(function(t, model, "bool llama_model::load_tensors"))
	experts := regexp.MustCompile(`n_expert must be > 0|cannot have zero experts|GGML_ASSERT\(n_expert && n_expert_used\)`)
	optional := regexp.MustCompile(`\boutput\s*=\s*create_tensor\([^;]*TENSOR_NOT_REQUIRED`)
	fallback := regexp.MustCompile(`if \(output == NULL\)|if \(!output\)`)
	for i, body := range bodies {
		for _, l := range labels[i] {
			if experts.MatchString(body) && l != "LLM_ARCH_LFM2" { // lfm2: n_layer_dense_lead = n_layer
				add(l, "needsExperts")
			}
			if optional.MatchString(body) && !fallback.MatchString(body) {
				add(l, "needsOutput")
			}
		}
	}
	want := map[string][]string{}
	order := []string{"sameKV", "rotIsK", "rotIsV", "ropes", "needsExperts", "needsOutput"}
	for name, r := range derived {
		want[name] = []string{}
		for _, k := range order {
			if r[k] {
				want[name] = append(want[name], k)
			}
		}
	}
	return want
}

// ruleOrder is the order of ArchRuleNames' constraint names.
var ruleOrder = []string{"sameKV", "rotIsK", "rotIsV", "ropes", "needsExperts", "needsOutput"}

// derivedArchRulesPerClass derives the rules from the layout of llama.cpp
// after the pin (master of 2026): one class per architecture,
// llama_model_X in src/models/*.cpp with its load_arch_hparams,
// load_arch_tensors and graph constructor, made by llama_model_mapping in
// llama-model.cpp, some deriving from another's class (models.h). The rules
// are those of the pinned layout, found in the class's file and its bases'
// (a derived class may keep its base's graph or loader); a class whose
// build_arch_graph aborts (clip, a stub for quantizing) has no graph.
func derivedArchRulesPerClass(t *testing.T) map[string][]string {
	arch := readLlama(t, "src/llama-arch.cpp")
	archName := map[string]string{}
	for _, m := range regexp.MustCompile(`\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(arch, -1) {
		archName[m[1]] = m[2]
	}
	// A class's base, and the class whose graph it reuses (using graph = llama_model_Y::graph).
	base, graphOf := map[string]string{}, map[string]string{}
	models := readLlama(t, "src/models/models.h")
	decl := regexp.MustCompile(`struct (llama_model_\w+) : public (llama_model_\w+)`)
	for _, m := range decl.FindAllStringSubmatchIndex(models, -1) {
		c := models[m[2]:m[3]]
		base[c] = models[m[4]:m[5]]
		end := len(models)
		if next := decl.FindAllStringIndex(models[m[1]:], 1); next != nil {
			end = m[1] + next[0][0]
		}
		if g := regexp.MustCompile(`using graph = (llama_model_\w+)::graph`).FindStringSubmatch(models[m[1]:end]); g != nil {
			graphOf[c] = g[1]
		}
	}
	head := regexp.MustCompile(`const int64_t n_embd_head\s*=\s*hparams\.n_embd_head_([kv])`)
	experts := regexp.MustCompile(`n_expert must be > 0|cannot have zero experts|GGML_ASSERT\(n_expert && n_expert_used\)`)
	optional := regexp.MustCompile(`\boutput\s*=\s*create_tensor\([^;]*TENSOR_NOT_REQUIRED`)
	fallback := regexp.MustCompile(`if \(output == NULL\)|if \(!output\)`)
	method := regexp.MustCompile(`(llama_model_\w+)::(?:graph::graph|load_arch_tensors|load_arch_hparams|build_arch_graph)\(`)
	own := map[string]map[string]bool{}
	noGraph := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(llamaSource(t), "src", "models", "*.cpp"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src := string(b)
		r := map[string]bool{}
		if m := head.FindStringSubmatch(src); m != nil {
			other := map[string]string{"k": "v", "v": "k"}[m[1]]
			if regexp.MustCompile(`(?m)^\s*GGML_ASSERT\(n_embd_head == hparams\.n_embd_head_` + other + `(?:\(\))?\)`).MatchString(src) {
				r["sameKV"] = true
			}
			if regexp.MustCompile(`(?m)^\s*GGML_ASSERT\(n_embd_head == (?:hparams\.)?n_rot(?:\(\))?\)`).MatchString(src) {
				r["rotIs"+strings.ToUpper(m[1])] = true
			}
		}
		if strings.Contains(src, "GGML_ASSERT(hparams.n_embd_v_gqa(il) == hparams.n_embd_k_gqa(il))") {
			r["sameKV"] = true
		}
		if strings.Contains(src, "ggml_rope") {
			r["ropes"] = true
		}
		if experts.MatchString(src) && !strings.HasSuffix(f, "/lfm2.cpp") { // lfm2: n_layer_dense_lead = n_layer
			r["needsExperts"] = true
		}
		if optional.MatchString(src) && !fallback.MatchString(src) {
			r["needsOutput"] = true
		}
		for _, m := range regexp.MustCompile(`(llama_model_\w+)::build_arch_graph\([^)]*\) const \{\s*GGML_ABORT`).FindAllStringSubmatch(src, -1) {
			noGraph[m[1]] = true
		}
		for _, m := range method.FindAllStringSubmatch(src, -1) {
			if own[m[1]] == nil {
				own[m[1]] = map[string]bool{}
			}
			for k := range r {
				own[m[1]][k] = true
			}
		}
	}
	labels, bodies := caseBlocks(function(t, readLlama(t, "src/llama-model.cpp"), "static llama_model * llama_model_mapping"))
	want := map[string][]string{}
	for i, body := range bodies {
		m := regexp.MustCompile(`return new (llama_model_\w+)\(`).FindStringSubmatch(body)
		require.NotNil(t, m, "llama_model_mapping of %v", labels[i])
		rules := map[string]bool{}
		graph := true
		seen := map[string]bool{}
		var resolve func(c string)
		resolve = func(c string) {
			if c == "" || c == "llama_model_base" || seen[c] {
				return
			}
			seen[c] = true
			r, ok := own[c]
			require.True(t, ok || base[c] != "", "the methods of %s", c)
			for k := range r {
				rules[k] = true
			}
			graph = graph && !noGraph[c]
			resolve(base[c])
			resolve(graphOf[c])
		}
		resolve(m[1])
		for _, l := range labels[i] {
			name, ok := archName[l]
			require.True(t, ok, l)
			if !graph {
				continue
			}
			want[name] = []string{}
			for _, k := range ruleOrder {
				if rules[k] && !(k == "needsExperts" && l == "LLM_ARCH_LFM2") {
					want[name] = append(want[name], k)
				}
			}
		}
	}
	return want
}

// TestTensorOpsMatchLlamaCpp derives from llama-arch.cpp the operation
// each tensor name feeds (LLM_TENSOR_NAMES and LLM_TENSOR_INFOS); the
// validation's table must be the same.
func TestTensorOpsMatchLlamaCpp(t *testing.T) {
	want := derivedTensorOps(t)
	assert.Equal(t, want, llamacpp.TensorOpNames())
	assert.Greater(t, len(want), 150)
}

// derivedTensorOps is TestTensorOpsMatchLlamaCpp's table, derived from the
// engine's sources: the operation class of each tensor name.
func derivedTensorOps(t *testing.T) map[string]string {
	src := readLlama(t, "src/llama-arch.cpp")
	names := map[string]string{}
	i := strings.Index(src, "LLM_TENSOR_NAMES = {")
	require.Positive(t, i)
	block := src[i : i+strings.Index(src[i:], "};")]
	for _, m := range regexp.MustCompile(`\{\s*(LLM_TENSOR_\w+),\s*"([^"]+)"\s*\}`).FindAllStringSubmatch(block, -1) {
		names[m[1]] = m[2]
	}
	i = strings.Index(src, "LLM_TENSOR_INFOS = {")
	require.Positive(t, i)
	block = src[i : i+strings.Index(src[i:], "};")]
	class := map[string]string{"MUL_MAT": "matmul", "MUL_MAT_ID": "matmul_id", "GET_ROWS": "get_rows",
		"DIV": "div", "SSM_CONV": "ssm_conv", "IM2COL": "im2col", "NONE": "none",
		// the kernels of these take only f32 operands besides f32 activations
		"MUL": "f32", "ADD": "f32", "SCALE": "f32", "ROPE": "f32", "SSM_SCAN": "f32", "RWKV_WKV6": "f32"}
	want := map[string]string{}
	for _, m := range regexp.MustCompile(`\{\s*(LLM_TENSOR_\w+),\s*\{\s*LLM_TENSOR_LAYER_\w+,\s*GGML_OP_(\w+)\s*\}\s*\}`).FindAllStringSubmatch(block, -1) {
		c, ok := class[m[2]]
		require.True(t, ok, "operation %s of %s", m[2], m[1])
		n, ok := names[m[1]]
		require.True(t, ok, m[1])
		if old, dup := want[n]; dup {
			require.Equal(t, old, c, "two classes for %s", n)
		}
		want[n] = c
	}
	return want
}

// TestPreTokenizersMatchLlamaCpp derives from llama-vocab.cpp the
// tokenizer.ggml.pre values llama_vocab::impl::load compares with; the
// validation must know exactly those.
func TestPreTokenizersMatchLlamaCpp(t *testing.T) {
	want := map[string]bool{}
	for _, m := range regexp.MustCompile(`tokenizer_pre == "([^"]+)"`).FindAllStringSubmatch(readLlama(t, "src/llama-vocab.cpp"), -1) {
		want[m[1]] = true
	}
	assert.Equal(t, want, llamacpp.KnownPreTokenizers())
	assert.Greater(t, len(want), 50)
}

// TestArchValuesInLlamaCpp: each single-value assertion the validation
// mirrors is in the graph builder of its architecture.
func TestArchValuesInLlamaCpp(t *testing.T) {
	files := map[string]string{"ernie4_5-moe": "models/ernie4-5-moe.cpp", "lfm2": "models/lfm2.cpp",
		"lfm2moe": "models/lfm2.cpp", "rwkv6": "models/rwkv6.cpp", "rwkv7": "models/rwkv7.cpp",
		"baichuan": "models/baichuan.cpp", "grovemoe": "llama-model.cpp", "rwkv6qwen2": "models/rwkv6qwen2.cpp",
		"arwkv7": "models/arwkv7.cpp", "wavtokenizer-dec": "models/wavtokenizer-dec.cpp"}
	asserts := llamacpp.ArchValueAsserts()
	require.Len(t, asserts, len(files))
	models, _ := os.ReadFile(filepath.Join(llamaSource(t), "src", "models", "models.h"))
	perClass := strings.Contains(string(models), "public llama_model_base")
	for arch, as := range asserts {
		rel := "src/" + files[arch]
		if perClass && !strings.HasPrefix(files[arch], "models/") {
			// the layout after the pin: one file per architecture's class
			rel = "src/models/" + strings.ReplaceAll(arch, "_", "-") + ".cpp"
		}
		src := readLlama(t, rel)
		for _, a := range as {
			assert.Contains(t, src, a, arch)
		}
	}
}
