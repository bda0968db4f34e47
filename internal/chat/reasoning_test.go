package chat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The formats of the real templates vendored for internal/jinja's tests.
func TestFormatOf(t *testing.T) {
	for file, want := range map[string]Format{
		"Qwen-Qwen2.5-7B-Instruct.jinja":                    {Family: Hermes},
		"Qwen-Qwen3-0.6B.jinja":                             {Family: Hermes, Reasoning: Think},
		"Qwen3.5-35B-A3B-Q8_0.jinja":                        {Family: Hermes, Reasoning: Think},
		"Qwen-QwQ-32B.jinja":                                {Family: Hermes, Reasoning: Think},
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": {Family: Hermes},
		"meta-llama-Llama-3.1-8B-Instruct.jinja":            {Family: Llama3},
		"Llama-3.2-1B-Instruct-GGUF.jinja":                  {Family: Llama3},
		"Ministral-3-14B-Instruct-2512-Q4_0.jinja":          {Family: Mistral},
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":        {Family: Mistral},
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja":    {Family: JSON, Reasoning: Think},
		"google-gemma-3-it.jinja":                           {Family: JSON},
		"ibm-granite-granite-3.3-2B-Instruct.jinja":         {Family: JSON, Reasoning: Think},
		"GLM-5.2.jinja":                                     {Family: Hermes, Reasoning: Think},
		"microsoft-Phi-3.5-mini-instruct.jinja":             {Family: JSON},
	} {
		src, err := os.ReadFile(filepath.Join("..", "jinja", "testdata", "templates", file))
		require.NoError(t, err)
		assert.Equal(t, want, FormatOf(string(src)), file)
	}
}

// The generation prompts of the real templates (their last lines, as
// they render with add_generation_prompt) open the reasoning or not.
func TestOpensReasoning(t *testing.T) {
	f := Format{Family: Hermes, Reasoning: Think}
	for prompt, want := range map[string]bool{
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n": false, // Qwen 3
		"<|im_start|>assistant\n<think>\n\n</think>\n\n":          false, // Qwen 3, enable_thinking false
		"<|im_start|>assistant\n<think>\n":                        true,  // QwQ, Qwen 3.5
		"<｜User｜>Hi<｜Assistant｜><think>\n":                        true,  // DeepSeek R1
		"<｜User｜>Hi<｜Assistant｜></think>":                         false, // DeepSeek V3.1, thinking false
		"<|assistant|><think>":                                    true,  // GLM
		"<|assistant|><think></think>":                            false, // GLM, enable_thinking false
	} {
		assert.Equal(t, want, f.OpensReasoning(prompt), prompt)
	}
	assert.False(t, Format{Family: Hermes}.OpensReasoning("<think>\n"), "no markers, no reasoning")
}

// Reasoning goes apart from the content, its spaces trimmed; inline, the
// content is the text as written.
func TestReadReasoning(t *testing.T) {
	think := Format{Reasoning: Think}
	checkCases(t, Options{Format: think, Tools: weatherTools}, []readCase{
		{"qwen 3", Hermes, "<think>\nThe user greets me.\n</think>\n\nHello!", "Hello!", "The user greets me.", nil},
		{"qwen 3 call", Hermes, "<think>\nWeather: a tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"", "Weather: a tool.", []string{`get_weather {"city": "Paris"}`}},
		{"empty", Hermes, "<think>\n\n</think>\n\nHello!", "Hello!", "", nil},
		{"no reasoning", Hermes, "Hello!", "Hello!", "", nil},
		{"unclosed", Hermes, "<think>\nHmm, let me", "", "Hmm, let me", nil},
		{"not at the start", Hermes, "Hi <think>x</think>", "Hi <think>x</think>", "", nil},
		{"bare json after", JSON, "<think>a call</think>\n{\"name\": \"get_time\"}", "", "a call", []string{`get_time {}`}},
	})
	// DeepSeek R1, QwQ, Qwen 3.5: the prompt opened the reasoning.
	checkCases(t, Options{Format: think, InReasoning: true}, []readCase{
		{"r1", JSON, "Okay, the user says hi.\n</think>\n\nHello!", "Hello!", "Okay, the user says hi.", nil},
		{"r1 writes the marker too", JSON, "<think>\nOkay.\n</think>\n\nHello!", "Hello!", "Okay.", nil},
		{"r1 cut", JSON, "Okay, the", "", "Okay, the", nil},
	})
	checkCases(t, Options{Format: Format{Reasoning: GemmaThought}}, []readCase{
		{"gemma 4", JSON, "<|channel>thought\nThe user greets me.<channel|>Hello!", "Hello!", "The user greets me.", nil},
	})
	checkCases(t, Options{Format: think, ReasoningInline: true}, []readCase{
		{"inline", Hermes, "<think>\nThe user greets me.\n</think>\n\nHello!", "<think>\nThe user greets me.\n</think>\n\nHello!", "", nil},
	})
	checkCases(t, Options{Format: think, ReasoningInline: true, InReasoning: true}, []readCase{
		{"inline r1", JSON, "Okay.\n</think>\n\nHello!", "Okay.\n</think>\n\nHello!", "", nil},
	})
}
