package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// costReport turns the cost runs into tables: each cell the median of the
// repetitions, with their range where they differ.
type costReport struct {
	jobs, reps       int
	server, settings string
	walinspect       bool
	walFailed        bool         // a phase's WAL could not be read back
	runs             [][]*costRun // by costVariants, by repetition
}

// costTable is one table of the report.
type costTable struct {
	title  string
	header []string
	align  string // a letter per column: l or r
	rows   [][]string
	notes  []string
}

// costMetric is one figure of a phase of variant v.
type costMetric func(v int, f phaseFigures) float64

func (r *costReport) heading() []string {
	h := []string{
		fmt.Sprintf("PostgreSQL: where a job's cost goes. %d jobs; figures per job unless said, the median of %d repetition(s), their range in brackets where they differ.", r.jobs, r.reps),
		"Server: " + r.server + "; " + r.settings + ".",
		fmt.Sprintf("enqueue: %d jobs in calls of %d (errand EnqueueMany; River InsertMany, and InsertManyFast, which is COPY). "+
			"work: the work measure on them (claim, run a no-op, acknowledge; errand one queue of %d, River MaxWorkers %d).", r.jobs, batchSize, workers, workers),
		"Each phase starts after a CHECKPOINT, so every page's first change in it writes a full-page image. Counters: pg_stat_wal (whole server), " +
			"pg_stat_user_tables, pg_stat_statements, pg_relation_size; WAL read back with pg_walinspect; client calls by a pgx tracer.",
	}
	if r.walFailed {
		h = append(h, "The WAL of a phase could not be read back (see the log): the figures read from the WAL are left out.")
	}
	return h
}

// vals is m over the repetitions of variant v's phase ph.
func (r *costReport) vals(v, ph int, m costMetric) []float64 {
	var out []float64
	for _, run := range r.runs[v] {
		out = append(out, m(v, run.phases[ph]))
	}
	return out
}

// cell formats the median of vs, and their range if it shows.
func cell(vs []float64, format func(float64) string) string {
	if len(vs) == 0 {
		return "–"
	}
	s := format(median(vs))
	if lo, hi := format(slices.Min(vs)), format(slices.Max(vs)); lo != hi {
		s += " [" + lo + "–" + hi + "]"
	}
	return s
}

// costNum formats a figure with the digits that tell.
func costNum(x float64) string {
	a := math.Abs(x)
	switch {
	case x == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 0.1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case a >= 0.001:
		return strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strconv.FormatFloat(x, 'f', 5, 64)
}

func costInt(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }

// sum adds the figures whose names start with prefix and pass keep.
func sum(f phaseFigures, prefix string, keep func(rest string) bool) float64 {
	t := 0.0
	for k, v := range f {
		if rest, ok := strings.CutPrefix(k, prefix); ok && (keep == nil || keep(rest)) {
			t += v
		}
	}
	return t
}

// key is the figure name as a metric.
func key(name string) costMetric { return func(_ int, f phaseFigures) float64 { return f[name] } }

// indexNames are variant v's job-table indexes.
func (r *costReport) indexNames(v int) []string {
	var out []string
	for _, ix := range r.runs[v][0].indexes {
		out = append(out, ix.name)
	}
	return out
}

func (r *costReport) tables() []costTable {
	var out []costTable
	for ph, phase := range costPhases {
		out = append(out, r.summary(ph, phase))
	}
	for v := range costVariants {
		out = append(out, r.indexTable(v))
		if r.walinspect {
			out = append(out, r.updateTable(v))
		}
		out = append(out, r.tablesWritten(v), r.statements(v))
		if r.walinspect {
			out = append(out, r.recordTypes(v), r.relationTable(v))
		}
	}
	return out
}

// summary is the table of one phase, a column per variant.
func (r *costReport) summary(ph int, phase string) costTable {
	t := costTable{align: "l"}
	for _, v := range costVariants {
		t.header = append(t.header, v.name+" ("+v.enqueue+")")
		t.align += "r"
	}
	t.header = append([]string{"per job"}, t.header...)
	if phase == "enqueue" {
		t.title = "Enqueue, per job"
	} else {
		t.title = "Work (claim, no-op, ack), per job; River's two columns after enqueueing with InsertMany and with InsertManyFast"
	}
	perJob := func(m costMetric) costMetric {
		return func(v int, f phaseFigures) float64 { return m(v, f) / float64(r.jobs) }
	}
	perThousand := func(m costMetric) costMetric {
		return func(v int, f phaseFigures) float64 { return 1000 * m(v, f) / float64(r.jobs) }
	}
	tab := func(counter string) costMetric {
		return func(v int, f phaseFigures) float64 { return f["tab."+counter+"."+costVariants[v].table] }
	}
	indexSum := func(prefix string) costMetric {
		return func(v int, f phaseFigures) float64 {
			t := 0.0
			for _, ix := range r.indexNames(v) {
				t += f[prefix+ix]
			}
			return t
		}
	}
	type line struct {
		label  string
		m      costMetric
		format func(float64) string
		wal    bool // read from the WAL
	}
	lines := []line{
		{"WAL records", perJob(key("wal.records")), costNum, false},
		{"WAL full-page images", perJob(key("wal.fpi")), costNum, false},
		{"WAL bytes", perJob(key("wal.bytes")), costNum, false},
		{"WAL writes", perJob(key("wal.write")), costNum, false},
		{"WAL syncs", perJob(key("wal.sync")), costNum, false},
		{"job table: rows inserted", perJob(tab("ins")), costNum, false},
		{"job table: rows updated", perJob(tab("upd")), costNum, false},
		{"job table: of which HOT", perJob(tab("hot")), costNum, false},
		{"job table: HOT share of updates (%)", func(v int, f phaseFigures) float64 {
			if u := tab("upd")(v, f); u > 0 {
				return 100 * tab("hot")(v, f) / u
			}
			return math.NaN()
		}, func(x float64) string {
			if math.IsNaN(x) {
				return "–"
			}
			return costInt(x)
		}, false},
		{"job table: updates to another page", perJob(key("walrow.moved")), costNum, true},
		{"job table: rows deleted", perJob(tab("del")), costNum, false},
		{"other tables: rows written", perJob(func(v int, f phaseFigures) float64 {
			other := func(rest string) bool { return !strings.HasSuffix(rest, "."+costVariants[v].table) }
			return sum(f, "tab.", func(rest string) bool {
				return other(rest) && (strings.HasPrefix(rest, "ins.") || strings.HasPrefix(rest, "upd.") || strings.HasPrefix(rest, "del."))
			})
		}), costNum, false},
		{"job table indexes: entries written", perJob(indexSum("walrel.entries.")), costNum, true},
		{"job table heap: WAL bytes", perJob(func(v int, f phaseFigures) float64 { return f["walrel.bytes."+costVariants[v].table] }), costNum, true},
		{"job table indexes: WAL bytes", perJob(indexSum("walrel.bytes.")), costNum, true},
		{"other relations (catalogs, the schema's other tables): WAL bytes", perJob(func(v int, f phaseFigures) float64 {
			t := sum(f, "walrel.bytes.", nil) - f["walrel.bytes."+costVariants[v].table] - f["walrel.bytes.(no relation)"]
			for _, ix := range r.indexNames(v) {
				t -= f["walrel.bytes."+ix]
			}
			return t
		}), costNum, true},
		{"no relation (commits and the like): WAL bytes", perJob(key("walrel.bytes.(no relation)")), costNum, true},
		{"job table heap: bytes added", perJob(func(v int, f phaseFigures) float64 { return f["grow."+costVariants[v].table] }), costNum, false},
		{"job table indexes: bytes added", perJob(indexSum("grow.")), costNum, false},
		{"server CPU, every postgres process (µs)", perJob(func(_ int, f phaseFigures) float64 { return 1e6 * f["cpu.server"] }), costNum, false},
		{"client CPU, this process (µs)", perJob(func(_ int, f phaseFigures) float64 { return 1e6 * f["cpu.client"] }), costNum, false},
		{"wall time (µs)", perJob(func(_ int, f phaseFigures) float64 { return 1e6 * f["cpu.wall"] }), costNum, false},
		{"statements (pg_stat_statements), per 1,000 jobs", perThousand(key("stmt.calls")), costNum, false},
		{"client calls (pgx: statements, batches, COPYs, prepares), per 1,000 jobs", perThousand(func(_ int, f phaseFigures) float64 {
			return f["client.queries"] + f["client.batches"] + f["client.copies"] + f["client.prepares"]
		}), costNum, false},
		{"job table heap size after the phase (kB, total)", func(v int, f phaseFigures) float64 {
			return f["size."+costVariants[v].table] / 1024
		}, costInt, false},
		{"job table indexes size after the phase (kB, total)", func(v int, f phaseFigures) float64 {
			return indexSum("size.")(v, f) / 1024
		}, costInt, false},
		{"autovacuum and autoanalyze runs in the phase (total)", func(_ int, f phaseFigures) float64 {
			return sum(f, "tab.vacuum.", nil) + sum(f, "tab.analyze.", nil)
		}, costInt, false},
		{"checkpoints in the phase (total)", key("checkpoints"), costInt, false},
		{"WAL records read back (pg_walinspect)", perJob(key("walinspect.n")), costNum, true},
	}
	for _, l := range lines {
		if l.wal && !r.walinspect {
			continue
		}
		row := []string{l.label}
		for v := range costVariants {
			row = append(row, cell(r.vals(v, ph, l.m), l.format))
		}
		t.rows = append(t.rows, row)
	}
	t.notes = append(t.notes,
		"Index entries: from the WAL, B-tree leaf inserts and page splits (each carries the new entry), GIN pending-list inserts. "+
			"Bytes added: growth of pg_relation_size over the phase. Client calls: pgx calls on the systems' pools, a pipelined batch once.")
	return t
}

// indexTable lists variant v's job table and its indexes, with what each
// phase wrote into them.
func (r *costReport) indexTable(v int) costTable {
	cv := costVariants[v]
	t := costTable{
		title: fmt.Sprintf("%s (%s): %s and its indexes, per job", cv.name, cv.enqueue, cv.table),
		header: []string{"relation", "definition", "entries: enqueue", "entries: work",
			"bytes added: enqueue", "bytes added: work", "size after work (kB)"},
		align: "llrrrrr",
	}
	perJob := func(name string) costMetric {
		return func(_ int, f phaseFigures) float64 { return f[name] / float64(r.jobs) }
	}
	kB := func(name string) costMetric { return func(_ int, f phaseFigures) float64 { return f[name] / 1024 } }
	rels := []indexInfo{{name: cv.table, def: "(the heap; its entries: row versions written)"}}
	rels = append(rels, r.runs[v][0].indexes...)
	for _, ix := range rels {
		def := ix.def
		if ix.method != "" && ix.method != "btree" {
			def = ix.method + " " + def
		}
		entries := perJob("walrel.entries." + ix.name)
		if ix.name == cv.table {
			entries = func(_ int, f phaseFigures) float64 {
				return (f["tab.ins."+cv.table] + f["tab.upd."+cv.table]) / float64(r.jobs)
			}
		}
		row := []string{ix.name, def, "–", "–"}
		if r.walinspect || ix.name == cv.table {
			row[2], row[3] = cell(r.vals(v, 0, entries), costNum), cell(r.vals(v, 1, entries), costNum)
		}
		row = append(row,
			cell(r.vals(v, 0, perJob("grow."+ix.name)), costNum), cell(r.vals(v, 1, perJob("grow."+ix.name)), costNum),
			cell(r.vals(v, 1, kB("size."+ix.name)), costInt))
		t.rows = append(t.rows, row)
	}
	return t
}

// costTopRelations is how many relations the WAL table lists.
const costTopRelations = 16

// relationTable lists the WAL of each relation, most bytes first.
func (r *costReport) relationTable(v int) costTable {
	cv := costVariants[v]
	t := costTable{
		title: fmt.Sprintf("%s (%s): WAL by relation, per job (pg_walinspect)", cv.name, cv.enqueue),
		header: []string{"relation", "enqueue: records", "enqueue: bytes", "enqueue: FPIs",
			"work: records", "work: bytes", "work: FPIs"},
		align: "lrrrrrr",
	}
	bytes := map[string]float64{}
	for ph := range costPhases {
		for _, rel := range r.keys(v, ph, "walrel.bytes.") {
			bytes[rel] += median(r.vals(v, ph, key("walrel.bytes."+rel)))
		}
	}
	rels := make([]string, 0, len(bytes))
	for rel := range bytes {
		rels = append(rels, rel)
	}
	byMost(rels, bytes)
	perJob := func(name string) costMetric {
		return func(_ int, f phaseFigures) float64 { return f[name] / float64(r.jobs) }
	}
	for i, rel := range rels {
		if i == costTopRelations {
			rest := 0.0
			for _, rel := range rels[i:] {
				rest += bytes[rel]
			}
			t.rows = append(t.rows, []string{fmt.Sprintf("(%d other relations of the schema, bytes of both phases: %s)",
				len(rels)-i, costNum(rest/float64(r.jobs))), "", "", "", "", "", ""})
			break
		}
		row := []string{rel}
		for ph := range costPhases {
			for _, c := range []string{"n", "bytes", "fpi"} {
				row = append(row, cell(r.vals(v, ph, perJob("walrel."+c+"."+rel)), costNum))
			}
		}
		t.rows = append(t.rows, row)
	}
	t.notes = append(t.notes, "A record counts for the relation of its first block. (other relations): the catalogs, "+
		"and anything outside the system's schema; (no relation): commits and the like.")
	return t
}

// byMost sorts names by their value in by, most first, then by name.
func byMost(names []string, by map[string]float64) {
	slices.SortStableFunc(names, func(a, b string) int {
		if by[a] != by[b] {
			if by[a] > by[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
}

// keys lists the figure names with prefix in any repetition of variant
// v's phase ph, without the prefix.
func (r *costReport) keys(v, ph int, prefix string) []string {
	seen := map[string]bool{}
	for _, run := range r.runs[v] {
		for k := range run.phases[ph] {
			if rest, ok := strings.CutPrefix(k, prefix); ok {
				seen[rest] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// updateTable lists the updates of a job row by the indexes they wrote.
func (r *costReport) updateTable(v int) costTable {
	cv := costVariants[v]
	t := costTable{
		title:  fmt.Sprintf("%s (%s): updates of each %s row, by the indexes each wrote (from the WAL)", cv.name, cv.enqueue, cv.table),
		header: []string{"phase", "update", "HOT", "to another page", "indexes written", "per job"},
		align:  "lllllr",
	}
	for ph, phase := range costPhases {
		for _, sig := range r.keys(v, ph, "sig.") {
			parts := strings.SplitN(sig, "|", 4)
			n, _ := strconv.Atoi(parts[0])
			label := ordinal(n) + " of the row in the phase"
			if phase == "work" && n == 1 {
				label += " (the claim)"
			}
			if phase == "work" && n == 2 {
				label += " (the ack)"
			}
			hot := "no"
			if parts[1] == "HOT" {
				hot = "yes"
			}
			moved := "no"
			if parts[2] == "moved" {
				moved = "yes"
			}
			indexes := parts[3]
			if indexes == "" {
				indexes = "none"
			}
			t.rows = append(t.rows, []string{phase, label, hot, moved, indexes,
				cell(r.vals(v, ph, func(_ int, f phaseFigures) float64 { return f["sig."+sig] / float64(r.jobs) }), costNum)})
		}
	}
	t.notes = append(t.notes, "A no-op job is claimed once and acknowledged once: its 1st update in the work phase is the claim, its 2nd the ack. "+
		"A non-HOT update adds an entry to every index whose predicate the new row version satisfies. "+
		"An update whose new version goes to another page first marks the old version with a lock, WAL-logged (a Heap LOCK record), "+
		"besides the row lock of a claim's FOR UPDATE.")
	return t
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "1st update"
	case 2:
		return "2nd update"
	case 3:
		return "3rd update"
	}
	return fmt.Sprintf("update %d", n)
}

// tablesWritten lists every table of the schema a phase wrote rows of.
func (r *costReport) tablesWritten(v int) costTable {
	cv := costVariants[v]
	t := costTable{
		title:  fmt.Sprintf("%s (%s): rows written per job, by table (pg_stat_user_tables)", cv.name, cv.enqueue),
		header: []string{"phase", "table", "inserted", "updated", "of which HOT", "deleted", "autovacuums (total)", "autoanalyzes (total)"},
		align:  "llrrrrrr",
	}
	for ph, phase := range costPhases {
		for _, table := range r.keys(v, ph, "tab.ins.") {
			var vals [4][]float64
			written := false
			for i, c := range []string{"ins", "upd", "hot", "del"} {
				vals[i] = r.vals(v, ph, func(_ int, f phaseFigures) float64 { return f["tab."+c+"."+table] / float64(r.jobs) })
				written = written || slices.Max(vals[i]) != 0
			}
			for _, c := range []string{"vacuum", "analyze"} {
				written = written || slices.Max(r.vals(v, ph, key("tab."+c+"."+table))) != 0
			}
			if !written {
				continue
			}
			row := []string{phase, table}
			for _, vs := range vals {
				row = append(row, cell(vs, costNum))
			}
			for _, c := range []string{"vacuum", "analyze"} {
				row = append(row, cell(r.vals(v, ph, key("tab."+c+"."+table)), costInt))
			}
			t.rows = append(t.rows, row)
		}
	}
	return t
}

// costTopStatements is how many statements a phase lists.
const costTopStatements = 8

// statements lists each phase's statements, most called first.
func (r *costReport) statements(v int) costTable {
	cv := costVariants[v]
	t := costTable{
		title:  fmt.Sprintf("%s (%s): statements by calls (pg_stat_statements, top-level)", cv.name, cv.enqueue),
		header: []string{"phase", "calls per 1,000 jobs", "rows per call", "mean ms", "WAL bytes per job", "statement"},
		align:  "lrrrrl",
	}
	for ph, phase := range costPhases {
		qs := r.keys(v, ph, "stmt.calls.")
		calls := map[string]float64{}
		for _, q := range qs {
			calls[q] = median(r.vals(v, ph, key("stmt.calls."+q)))
		}
		byMost(qs, calls)
		for i, q := range qs {
			if i == costTopStatements {
				rest := 0.0
				for _, q := range qs[i:] {
					rest += calls[q]
				}
				t.rows = append(t.rows, []string{phase, costNum(1000 * rest / float64(r.jobs)), "", "", "", fmt.Sprintf("(%d other statements)", len(qs)-i)})
				break
			}
			per := func(name string, by string) costMetric {
				return func(_ int, f phaseFigures) float64 {
					d := float64(r.jobs)
					if by != "" {
						d = f[by]
					}
					if d == 0 {
						return 0
					}
					return f[name] / d
				}
			}
			t.rows = append(t.rows, []string{phase,
				cell(r.vals(v, ph, func(v int, f phaseFigures) float64 { return 1000 * per("stmt.calls."+q, "")(v, f) }), costNum),
				cell(r.vals(v, ph, per("stmt.rows."+q, "stmt.calls."+q)), costNum),
				costNum(median(r.vals(v, ph, per("stmt.ms."+q, "stmt.calls."+q)))),
				cell(r.vals(v, ph, per("stmt.walbytes."+q, "")), costNum),
				abbreviate(q, 110)})
		}
	}
	t.notes = append(t.notes, "Mean ms is the server's execution time on this machine, under whatever else it ran: not a timing claim. "+
		"BEGIN, COMMIT and the like are statements too.")
	return t
}

// abbreviate shortens s to n characters.
func abbreviate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// costTopRecords is how many record types a phase lists.
const costTopRecords = 8

// recordTypes lists each phase's WAL by record type, most bytes first.
func (r *costReport) recordTypes(v int) costTable {
	cv := costVariants[v]
	t := costTable{
		title:  fmt.Sprintf("%s (%s): WAL by record type, per job (pg_walinspect)", cv.name, cv.enqueue),
		header: []string{"phase", "record", "records", "bytes", "full-page images"},
		align:  "llrrr",
	}
	for ph, phase := range costPhases {
		kinds := r.keys(v, ph, "walrec.bytes.")
		bytes := map[string]float64{}
		for _, k := range kinds {
			bytes[k] = median(r.vals(v, ph, key("walrec.bytes."+k)))
		}
		byMost(kinds, bytes)
		perJob := func(name string) costMetric {
			return func(_ int, f phaseFigures) float64 { return f[name] / float64(r.jobs) }
		}
		for i, k := range kinds {
			if i == costTopRecords {
				rest := 0.0
				for _, k := range kinds[i:] {
					rest += bytes[k]
				}
				t.rows = append(t.rows, []string{phase, fmt.Sprintf("(%d other record types)", len(kinds)-i), "", costNum(rest / float64(r.jobs)), ""})
				break
			}
			t.rows = append(t.rows, []string{phase, k,
				cell(r.vals(v, ph, perJob("walrec.n."+k)), costNum),
				cell(r.vals(v, ph, perJob("walrec.bytes."+k)), costNum),
				cell(r.vals(v, ph, perJob("walrec.fpi."+k)), costNum)})
		}
	}
	return t
}

func printCostTables(out io.Writer, heading []string, tables []costTable) {
	for _, h := range heading {
		fmt.Fprintln(out, h)
	}
	for _, t := range tables {
		fmt.Fprintf(out, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
		for _, n := range t.notes {
			fmt.Fprintln(out, n)
		}
	}
}

func writeCostMarkdown(b *strings.Builder, heading []string, tables []costTable) {
	for _, h := range heading {
		b.WriteString(h + "\n")
	}
	esc := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, t := range tables {
		fmt.Fprintf(b, "\n**%s**\n\n", t.title)
		b.WriteString("| " + strings.Join(t.header, " | ") + " |\n|")
		for _, a := range t.align {
			if a == 'r' {
				b.WriteString(" ---: |")
			} else {
				b.WriteString(" --- |")
			}
		}
		b.WriteString("\n")
		for _, row := range t.rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = esc.Replace(c)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
		for _, n := range t.notes {
			b.WriteString("\n" + n + "\n")
		}
	}
}
