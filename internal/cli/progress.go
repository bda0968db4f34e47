package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// ProgressBar draws a one-line progress bar, redrawn in place with a
// carriage return; it is meant for a terminal. A nil *ProgressBar draws
// nothing, so callers pass nil when stderr is not a terminal.
type ProgressBar struct {
	mu      sync.Mutex
	w       io.Writer
	label   string
	width   int
	percent int // last drawn, -1 before the first draw
	done    bool
}

// NewProgressBar returns a bar labelled label that writes to w.
func NewProgressBar(w io.Writer, label string) *ProgressBar {
	return &ProgressBar{w: w, label: label, width: 30, percent: -1}
}

// Set draws the bar at fraction f in [0, 1]; it redraws only when the
// whole percentage changes.
func (p *ProgressBar) Set(f float32) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f = min(max(f, 0), 1)
	pct := int(f * 100)
	if p.done || pct == p.percent {
		return
	}
	p.percent = pct
	n := int(f * float32(p.width))
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%%", p.label, strings.Repeat("#", n), strings.Repeat(".", p.width-n), pct)
}

// Done erases the bar's line, leaving the cursor at its start. Further
// calls of Set draw nothing.
func (p *ProgressBar) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done && p.percent >= 0 {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.done = true
}
