package serve

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/chat"
)

// benchToolPlan is weatherPlan's tools for a benchmark, Hermes's family.
func benchToolPlan(b *testing.B) *plan {
	body := `{"messages":[{"role":"user","content":"x"}],"tools":` + weatherTools + `}`
	req, err := decodeRequest([]byte(body), true)
	if err != nil {
		b.Fatal(err)
	}
	tp, err := parseTools(req, Limits{}.withDefaults())
	if err != nil || tp == nil {
		b.Fatal(err)
	}
	tp.family = chat.Hermes
	return &plan{tools: tp}
}

// pieces cuts text into pieces of 4 bytes, about a token's.
func pieces(text string) []string {
	var out []string
	for len(text) > 0 {
		n := min(4, len(text))
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// BenchmarkReplyReader reads streamed tool calls through a choice's
// reader, as the server does token by token: well-formed calls, and one
// call whose arguments never close. Its ns/token must not grow with the
// output (a reader that reparses what it holds is quadratic).
func BenchmarkReplyReader(b *testing.B) {
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
	for _, tokens := range []int{1024, 8192, 32768} {
		closed := pieces(strings.Repeat(call, tokens*4/len(call)+1))[:tokens]
		unclosed := pieces("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + strings.Repeat("abcd", tokens))[:tokens]
		for _, in := range []struct {
			name   string
			pieces []string
		}{{"closed", closed}, {"unclosed", unclosed}} {
			b.Run(fmt.Sprintf("%s/%d", in.name, tokens), func(b *testing.B) {
				p := benchToolPlan(b)
				sent := 0
				for b.Loop() {
					rd := p.newReader()
					sent = 0
					for _, piece := range in.pieces {
						for _, d := range rd.Add(piece) {
							sent += len(d.Content) + len(d.Reasoning)
							if d.Call != nil {
								sent += len(d.Call.Arguments)
							}
						}
					}
					rd.End(true)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
				b.ReportMetric(float64(sent), "delta-bytes")
			})
		}
	}
}
