package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// chart is what --chart draws: panels side by side, each a line chart of
// tokens/s over a categorical x axis.
type chart struct {
	Title  string
	Panels []panel
}

// panel is one line chart.
type panel struct {
	ID     string // "batch" or "beam"
	Title  string
	XLabel string
	YLabel string
	X      []int
	Series []series
}

// series is one line: Y[i] belongs to X[i]; NaN marks a missing point.
type series struct {
	Name string
	Y    []float64
}

// buildChart draws the batch and beam measurements of every model: total
// and per-row tokens/s by batch rows, returned-sequence and decoded tokens/s
// by beams.
func buildChart(rep *report) chart {
	c := chart{Title: fmt.Sprintf("llamabench on %s, %s", rep.Machine.CPU, plural(rep.Settings.Threads, "thread"))}
	batch := panel{ID: "batch", Title: "Batched greedy generation", XLabel: "rows", YLabel: "tokens/s", X: rep.Settings.BatchRows}
	beams := panel{ID: "beam", Title: "Beam search", XLabel: "beams", YLabel: "tokens/s", X: rep.Settings.Beams}
	for _, m := range rep.Models {
		name := strings.TrimSuffix(m.File, ".gguf")
		total, perRow := nanSeries(len(batch.X)), nanSeries(len(batch.X))
		out, decoded := nanSeries(len(beams.X)), nanSeries(len(beams.X))
		for _, r := range m.Results {
			switch r.Group {
			case groupBatch:
				if i := index(batch.X, r.Rows); i >= 0 {
					total[i] = r.TokensPerS.Median
					perRow[i] = r.PerRowTokensPerS.Median
				}
			case groupBeam:
				if i := index(beams.X, r.Beams); i >= 0 {
					out[i] = r.TokensPerS.Median
					decoded[i] = r.DecodedTokensPerS.Median
				}
			}
		}
		batch.Series = append(batch.Series, series{name + " total", total}, series{name + " per row", perRow})
		beams.Series = append(beams.Series, series{name + " output", out}, series{name + " decoded", decoded})
	}
	for _, p := range []panel{batch, beams} {
		if len(p.X) > 0 {
			c.Panels = append(c.Panels, p)
		}
	}
	return c
}

func nanSeries(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

func index(xs []int, v int) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return -1
}

// writeChart draws c into path, as SVG or PNG by the file's extension.
func writeChart(path string, c chart) error {
	var data []byte
	var err error
	if strings.EqualFold(filepath.Ext(path), ".png") {
		data, err = renderPNG(c)
	} else {
		data = renderSVG(c)
	}
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Geometry of the drawing, shared by SVG and PNG.
const (
	panelW     = 480
	titleH     = 34
	plotLeft   = 64
	plotRight  = 20
	plotTop    = 70
	plotBottom = 290 // y of the x axis
	legendTop  = plotBottom + 56
	legendRow  = 18
	smallText  = 11.0
	bigText    = 14.0
)

// size is the drawing's width and height: panels side by side, and room
// below them for the longest legend (two entries a row).
func (c chart) size() (int, int) {
	rows := 1
	for _, p := range c.Panels {
		rows = max(rows, (len(p.Series)+1)/2)
	}
	return panelW * max(len(c.Panels), 1), legendTop + legendRow*(rows-1) + 16
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// canvas is what the layout draws on.
type canvas interface {
	line(x1, y1, x2, y2 float64, color string, width float64)
	circle(x, y, r float64, color string)
	// text draws s with its baseline at y; anchor is start, middle or end.
	text(x, y float64, s string, size float64, anchor, color string)
	beginGroup(class, attr, value string)
	endGroup()
}

// layout draws c: a title, then the panels side by side.
func layout(c chart, cv canvas) {
	w, _ := c.size()
	width := float64(w)
	cv.text(width/2, 22, c.Title, bigText, "middle", "#000000")
	for i, p := range c.Panels {
		cv.beginGroup("panel", "data-panel", p.ID)
		drawPanel(p, float64(i*panelW), cv)
		cv.endGroup()
	}
}

func drawPanel(p panel, x0 float64, cv canvas) {
	left, right := x0+plotLeft, x0+panelW-plotRight
	top, bottom := float64(plotTop), float64(plotBottom)
	cv.text((left+right)/2, titleH+20, p.Title, bigText, "middle", "#000000")
	ymax := 0.0
	for _, s := range p.Series {
		for _, y := range s.Y {
			if !math.IsNaN(y) {
				ymax = max(ymax, y)
			}
		}
	}
	ymax = niceCeil(ymax * 1.05)
	ypos := func(y float64) float64 { return bottom - (bottom-top)*y/ymax }
	xpos := func(i int) float64 {
		if len(p.X) == 1 {
			return (left + right) / 2
		}
		return left + 10 + (right-left-20)*float64(i)/float64(len(p.X)-1)
	}
	// grid, axes and ticks
	for k := 0; k <= 5; k++ {
		v := ymax * float64(k) / 5
		y := ypos(v)
		cv.line(left, y, right, y, "#e0e0e0", 1)
		cv.text(left-6, y+4, formatTick(v), smallText, "end", "#333333")
	}
	cv.line(left, top, left, bottom, "#000000", 1)
	cv.line(left, bottom, right, bottom, "#000000", 1)
	cv.text(left, top-10, p.YLabel, smallText, "start", "#333333")
	for i, x := range p.X {
		cv.line(xpos(i), bottom, xpos(i), bottom+4, "#000000", 1)
		cv.text(xpos(i), bottom+17, strconv.Itoa(x), smallText, "middle", "#333333")
	}
	cv.text((left+right)/2, bottom+34, p.XLabel, smallText, "middle", "#333333")
	// series and legend
	for si, s := range p.Series {
		color := palette[si%len(palette)]
		cv.beginGroup("series", "data-series", s.Name)
		prev := -1
		for i, y := range s.Y {
			if math.IsNaN(y) {
				prev = -1
				continue
			}
			if prev >= 0 {
				cv.line(xpos(prev), ypos(s.Y[prev]), xpos(i), ypos(y), color, 2)
			}
			prev = i
		}
		for i, y := range s.Y {
			if !math.IsNaN(y) {
				cv.circle(xpos(i), ypos(y), 3.5, color)
			}
		}
		cv.endGroup()
		ly := float64(legendTop + legendRow*(si/2))
		lx := left + float64(si%2)*(right-left)/2
		cv.line(lx, ly-4, lx+18, ly-4, color, 3)
		cv.text(lx+24, ly, s.Name, smallText, "start", "#000000")
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func formatTick(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// svgCanvas writes SVG elements.
type svgCanvas struct{ b bytes.Buffer }

func renderSVG(c chart) []byte {
	cv := &svgCanvas{}
	w, h := c.size()
	fmt.Fprintf(&cv.b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	fmt.Fprintf(&cv.b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n", w, h, w, h)
	fmt.Fprintf(&cv.b, "<title>%s</title>\n", esc(c.Title))
	fmt.Fprintf(&cv.b, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n")
	layout(c, cv)
	cv.b.WriteString("</svg>\n")
	return cv.b.Bytes()
}

func (c *svgCanvas) line(x1, y1, x2, y2 float64, color string, width float64) {
	fmt.Fprintf(&c.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%g\"/>\n", x1, y1, x2, y2, color, width)
}

func (c *svgCanvas) circle(x, y, r float64, color string) {
	fmt.Fprintf(&c.b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"%s\"/>\n", x, y, r, color)
}

func (c *svgCanvas) text(x, y float64, s string, size float64, anchor, color string) {
	fmt.Fprintf(&c.b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"%s\" fill=\"%s\">%s</text>\n", x, y, size, anchor, color, esc(s))
}

func (c *svgCanvas) beginGroup(class, attr, value string) {
	fmt.Fprintf(&c.b, "<g class=\"%s\" %s=\"%s\">\n", class, attr, esc(value))
}

func (c *svgCanvas) endGroup() { c.b.WriteString("</g>\n") }

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
