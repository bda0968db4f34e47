package parity

import "testing"

const processorsFile = "testdata/processors.json"

func TestProcessorsFile(t *testing.T) {
	f, err := ReadFile(processorsFile)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != "processors" || len(f.Cases) != 287 {
		t.Fatalf("kind %q with %d cases, want processors with 287", f.Kind, len(f.Cases))
	}
	failed := 0
	for _, raw := range f.Cases {
		c, err := DecodeCase[ProcessorsCase](raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckProcessors(c); err != nil {
			failed++
			t.Errorf("%s (%s): %v", c.ID, c.Scenario, err)
		}
	}
	t.Logf("%d passed, %d failed", len(f.Cases)-failed, failed)
}
