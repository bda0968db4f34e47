package chat_test

import (
	"fmt"

	"github.com/llamaloop/llamaloop/internal/chat"
)

// A reader turns a choice's text, piece by piece as the model writes it,
// into reasoning, content and call deltas; End gives the calls.
func ExampleReader() {
	n := 0
	r := chat.NewReader(chat.Options{
		Format: chat.Format{Family: chat.Hermes, Reasoning: chat.Think},
		Tools:  []chat.Tool{{Name: "get_weather"}},
		NewID:  func() string { n++; return fmt.Sprint("call_", n) },
	})
	for _, piece := range []string{"<think>\nRain?", "\n</think>\n\nLet me check.\n<tool_call>\n", `{"name": "get_weather", `, `"arguments": {"city": `, `"Paris"}}`, "\n</tool_call>"} {
		for _, d := range r.Add(piece) {
			switch {
			case d.Reasoning != "":
				fmt.Printf("reasoning %q\n", d.Reasoning)
			case d.Content != "":
				fmt.Printf("content %q\n", d.Content)
			case d.Call.Name != "":
				fmt.Printf("call %d %s %s %q\n", d.Call.Index, d.Call.ID, d.Call.Name, d.Call.Arguments)
			default:
				fmt.Printf("call %d arguments %q\n", d.Call.Index, d.Call.Arguments)
			}
		}
	}
	_, calls := r.End(true)
	fmt.Printf("%s %s %s\n", calls[0].ID, calls[0].Name, calls[0].Arguments)
	// Output:
	// reasoning "Rain?"
	// content "Let me check."
	// call 0 call_1 get_weather "{\"city\": "
	// call 0 arguments "\"Paris\"}"
	// call_1 get_weather {"city": "Paris"}
}
