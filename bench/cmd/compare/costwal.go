package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// readWAL reads the WAL from from to to back with pg_walinspect and adds
// what it holds to f (see walAnalysis).
func (p *costProbe) readWAL(ctx context.Context, from, to string, f phaseFigures) error {
	if from == to {
		return nil
	}
	// pg_walinspect reads only WAL flushed to disk. The WAL writer
	// flushes whole pages only, unless an asynchronous commit waits, so
	// the records after the phase's last commit may not be: a commit of
	// the probe's own flushes them (its record comes after to).
	for try, deadline := 0, time.Now().Add(10*time.Second); ; try++ {
		var flushed bool
		if err := p.conn.QueryRow(ctx, "SELECT /* cost-probe */ pg_current_wal_flush_lsn() >= $1::pg_lsn", to).Scan(&flushed); err != nil {
			return err
		}
		if flushed {
			break
		}
		if try == 0 {
			if _, err := p.conn.Exec(ctx, "SELECT /* cost-probe */ pg_current_xact_id()"); err != nil {
				return err
			}
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the WAL up to %s was not flushed within 10s", to)
		}
		time.Sleep(50 * time.Millisecond)
	}
	a, err := p.walAnalysis(ctx, f)
	if err != nil {
		return err
	}
	rows, err := p.conn.Query(ctx, `SELECT /* cost-probe */ coalesce(xid::text::bigint, 0), resource_manager, record_type,
			record_length, coalesce(description, ''), coalesce(block_ref, '')
		FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)`, from, to)
	if err != nil {
		return err
	}
	var r walRecord
	_, err = pgx.ForEachRow(rows, []any{&r.xid, &r.rmgr, &r.typ, &r.length, &r.desc, &r.blockRef}, func() error {
		a.add(r)
		return nil
	})
	if err != nil {
		return err
	}
	a.finish()
	return nil
}

// walAnalysis reads the relations of the probe's schema, for a
// walAnalysis of its phase.
func (p *costProbe) walAnalysis(ctx context.Context, f phaseFigures) (*walAnalysis, error) {
	a := newWALAnalysis(p.table, f)
	if err := p.conn.QueryRow(ctx, "SELECT /* cost-probe */ oid::bigint FROM pg_database WHERE datname = current_database()").Scan(&a.db); err != nil {
		return nil, err
	}
	rows, err := p.conn.Query(ctx, `SELECT /* cost-probe */ pg_relation_filenode(c.oid)::bigint, c.relname, c.relkind = 'i', coalesce(t.relname, '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
		WHERE n.nspname = $1 AND pg_relation_filenode(c.oid) IS NOT NULL`, p.schema)
	if err != nil {
		return nil, err
	}
	var node int64
	var rel walRel
	_, err = pgx.ForEachRow(rows, []any{&node, &rel.name, &rel.index, &rel.table}, func() error {
		a.rels[node] = rel
		return nil
	})
	return a, err
}

// walRecord is a row of pg_get_wal_records_info.
type walRecord struct {
	xid            int64
	rmgr, typ      string
	length         int64
	desc, blockRef string
}

// walRel is a relation of the schema, by its file node.
type walRel struct {
	name  string
	index bool
	table string // an index's table
}

// walAnalysis counts the WAL records of a phase into its figures:
//
//	walrec.{n,bytes,fpi}.RMGR TYPE   records, bytes and full-page images by record type
//	walrel.{n,bytes,fpi}.REL         the same by relation (of the schema; the others are
//	                                 "(other relations)", records of none "(no relation)")
//	walrel.entries.INDEX             entries written into an index of the job table: B-tree
//	                                 leaf inserts, and splits (which carry the new entry);
//	                                 GIN pending-list inserts (fastupdate, the default)
//	sig.N|HOT|moved|INDEXES          updates of a job row: the N-th update of that row in the
//	                                 phase, HOT or not, its new version on another page or
//	                                 not, and the indexes the same transaction wrote before
//	                                 its next row change
//	walrow.moved                     updates of a job row to another page
//	walinspect.{records,bytes,fpi}   the totals, against pg_stat_wal's
//
// A record belongs to the relation of its first block. An update's index
// records follow it in its transaction (the executor inserts a new row
// version's index entries right after writing it), so each is put down to
// the last row change of the job table in its transaction. A row's
// updates are followed through its versions' positions: an update whose
// old version an update of this phase wrote is that row's next update.
type walAnalysis struct {
	table   string
	f       phaseFigures
	db      int64
	rels    map[int64]walRel
	pending map[int64]*rowUpdate // by transaction
	nth     map[uint64]int       // a row version an update of the phase wrote, by position: which update
}

type rowUpdate struct {
	nth        int
	hot, moved bool // moved: the new version is on another page
	indexes    map[string]bool
}

func newWALAnalysis(table string, f phaseFigures) *walAnalysis {
	return &walAnalysis{table: table, f: f, rels: map[int64]walRel{}, pending: map[int64]*rowUpdate{}, nth: map[uint64]int{}}
}

// blockRef is one block a record references.
type blockRef struct {
	id                  int
	spc, db, rel, block int64
	fpi                 bool
}

var blockRefRE = regexp.MustCompile(`blkref #(\d+): rel (\d+)/(\d+)/(\d+)(?: fork \w+)? blk (\d+)(\s*\(?FPW)?`)

func parseBlockRefs(s string) []blockRef {
	var out []blockRef
	for _, m := range blockRefRE.FindAllStringSubmatch(s, -1) {
		var n [5]int64
		for i := range n {
			n[i], _ = strconv.ParseInt(m[i+1], 10, 64)
		}
		out = append(out, blockRef{id: int(n[0]), spc: n[1], db: n[2], rel: n[3], block: n[4], fpi: m[6] != ""})
	}
	return out
}

// lockBitsRE reads a heap lock's infomask bits.
var lockBitsRE = regexp.MustCompile(`flags 0x[0-9A-Fa-f]+ ?(.*)$`)

// updateDescRE reads a heap update's old and new line pointers.
var updateDescRE = regexp.MustCompile(`^off (\d+) .*; new off (\d+)`)

// isIndexEntry reports whether a record of an index writes a new entry.
func isIndexEntry(rmgr, typ string) bool {
	switch rmgr {
	case "Btree":
		return typ == "INSERT_LEAF" || typ == "INSERT_POST" || typ == "SPLIT_L" || typ == "SPLIT_R"
	case "Gin":
		return typ == "UPDATE_META_PAGE"
	}
	return false
}

func (a *walAnalysis) add(r walRecord) {
	refs := parseBlockRefs(r.blockRef)
	rel, known := "(no relation)", false
	var info walRel
	if len(refs) > 0 {
		rel = "(other relations)"
		if refs[0].db == a.db {
			if info, known = a.rels[refs[0].rel]; known {
				rel = info.name
			}
		}
	}
	fpis := 0
	for _, b := range refs {
		if b.fpi {
			fpis++
		}
	}
	typ := strings.TrimSuffix(r.typ, "+INIT")
	kind := r.rmgr + " " + typ
	if kind == "Heap LOCK" {
		// A row lock (FOR UPDATE), or an update marking its old version
		// before it writes the new one on another page: told apart by
		// the lock's bits.
		if m := lockBitsRE.FindStringSubmatch(r.desc); m != nil {
			kind += " (" + strings.TrimSpace(m[1]) + ")"
		}
	}
	for _, k := range [][2]string{{"walrec.", "." + kind}, {"walrel.", "." + rel}, {"walinspect.", ""}} {
		a.f[k[0]+"n"+k[1]]++
		a.f[k[0]+"bytes"+k[1]] += float64(r.length)
		a.f[k[0]+"fpi"+k[1]] += float64(fpis)
	}
	jobIndex := known && info.index && info.table == a.table
	if jobIndex && isIndexEntry(r.rmgr, typ) {
		a.f["walrel.entries."+rel]++
	}
	switch {
	case r.rmgr == "Transaction":
		a.close(r.xid)
	case known && rel == a.table && isRowChange(r.rmgr, typ):
		a.close(r.xid)
		if r.rmgr == "Heap" && (typ == "UPDATE" || typ == "HOT_UPDATE") {
			u := &rowUpdate{hot: typ == "HOT_UPDATE", indexes: map[string]bool{}}
			u.nth, u.moved = a.follow(refs, r.desc)
			a.pending[r.xid] = u
		}
	case jobIndex:
		if u := a.pending[r.xid]; u != nil {
			u.indexes[rel] = true
		}
	}
}

// isRowChange reports whether a heap record writes or deletes a row.
func isRowChange(rmgr, typ string) bool {
	switch rmgr {
	case "Heap":
		return typ == "INSERT" || typ == "UPDATE" || typ == "HOT_UPDATE" || typ == "DELETE"
	case "Heap2":
		return typ == "MULTI_INSERT"
	}
	return false
}

// follow returns which update of its row an update record is, and
// whether it writes the new version on another page, and notes the
// version it writes. Block #0 is the new version's page, block #1 the old
// one's when it is another.
func (a *walAnalysis) follow(refs []blockRef, desc string) (nth int, moved bool) {
	m := updateDescRE.FindStringSubmatch(desc)
	if m == nil || len(refs) == 0 {
		return 0, false // not understood: reported as update 0
	}
	oldOff, _ := strconv.ParseUint(m[1], 10, 16)
	newOff, _ := strconv.ParseUint(m[2], 10, 16)
	newBlock, oldBlock := refs[0].block, refs[0].block
	for _, b := range refs {
		if b.id == 1 {
			oldBlock = b.block
		}
	}
	old := uint64(oldBlock)<<16 | oldOff
	n := a.nth[old] + 1
	delete(a.nth, old)
	a.nth[uint64(newBlock)<<16|newOff] = n
	return n, newBlock != oldBlock
}

// close counts the update pending in transaction xid, if any.
func (a *walAnalysis) close(xid int64) {
	u := a.pending[xid]
	if u == nil {
		return
	}
	delete(a.pending, xid)
	indexes := make([]string, 0, len(u.indexes))
	for ix := range u.indexes {
		indexes = append(indexes, ix)
	}
	slices.Sort(indexes)
	hot, moved := "", ""
	if u.hot {
		hot = "HOT"
	}
	if u.moved {
		moved = "moved"
		a.f["walrow.moved"]++
	}
	a.f[fmt.Sprintf("sig.%d|%s|%s|%s", u.nth, hot, moved, strings.Join(indexes, ", "))]++
}

// finish counts the updates still pending at the phase's end.
func (a *walAnalysis) finish() {
	for xid := range a.pending {
		a.close(xid)
	}
}
