package main

import (
	"fmt"
	"strings"
)

// figure draws the adaptive leg: the provider's capacity, the limit and
// what was served, a second, over time.
func figure(o options, ss []sample) string {
	const w, h, left, right, top, bottom = 760.0, 340.0, 60.0, 20.0, 40.0, 50.0
	end := (o.phase * 1).Seconds() * float64(len(o.caps))
	ymax := 0.0
	for _, s := range ss {
		ymax = max(ymax, s.capacity, s.limit, s.served)
	}
	step := 50.0
	for ymax/step > 8 {
		step *= 2
	}
	ymax = (float64(int(ymax/step)) + 1) * step
	x := func(sec float64) float64 { return left + (w-left-right)*sec/end }
	y := func(v float64) float64 { return h - bottom - (h-top-bottom)*v/ymax }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", w, h, w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%g" y="22" text-anchor="middle" font-size="15" font-weight="bold">An adaptive rate limit following a provider's hidden capacity (%s)</text>`+"\n", w/2, o.store)
	for v := 0.0; v <= ymax; v += step {
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/><text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", left, y(v), w-right, y(v), left-6, y(v), v)
	}
	for sec := 0.0; sec <= end; sec += 10 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%g</text>`+"\n", x(sec), h-bottom+16, sec)
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">seconds</text>`+"\n", (left+w-right)/2, h-bottom+34)
	fmt.Fprintf(&b, `<text x="16" y="%g" text-anchor="middle" transform="rotate(-90 16 %g)">requests a second</text>`+"\n", (top+h-bottom)/2, (top+h-bottom)/2)
	line := func(color, dash string, v func(sample) float64) {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="`, color, dash)
		for _, s := range ss {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(s.at.Seconds()), y(v(s)))
		}
		b.WriteString(`"/>` + "\n")
	}
	line("#bbb", "0", func(s sample) float64 { return s.served })
	line("#888", "6 4", func(s sample) float64 { return s.capacity })
	line("#1f6feb", "0", func(s sample) float64 { return s.limit })
	for i, l := range []struct{ color, dash, name string }{{"#888", "6 4", "hidden capacity"}, {"#1f6feb", "0", "adaptive limit"}, {"#bbb", "0", "served (250 ms samples)"}} {
		lx := left + 20 + float64(i)*190
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%g" y="%g" dominant-baseline="middle">%s</text>`+"\n", lx, top+4, lx+24, top+4, l.color, l.dash, lx+30, top+4, l.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
