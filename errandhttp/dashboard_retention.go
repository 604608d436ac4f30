package errandhttp

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// retentionPrunes is how many of the newest prunes the retention page
// lists.
const retentionPrunes = 10

// retentionData is the retention page. The database records no policy,
// only the prunes that deleted something (in the audit), and any process
// may prune: a worker that leads with its own policy, or an operator's
// errand prune. So the page shows the policy of the process serving it,
// when it has one, and separately the ages the newest prune applied.
type retentionData struct {
	// Configured is the policy this process's worker applies while it
	// leads; nil when it applies none.
	Configured *errand.RetentionPolicy
	// Prunes are the newest prunes, newest first; Last the ages the first
	// one applied, nil without a prune (or with details it cannot read).
	Prunes []pruneRecord
	Last   *pruneAges
	// Kinds is the retention in force per kind, under Configured or, with
	// none, under Last: the kinds with ages of their own, then the other
	// kinds that have jobs, which the default ages govern.
	Kinds  []kindRetention
	Source string // "configured", "last prune" or "" (none known)
}

// pruneAges are the ages of a prune's audit record (see
// errandstore.PruneDetails).
type pruneAges struct {
	SucceededAge time.Duration
	DeadAge      time.Duration
	Kinds        map[string]errandstore.KindRetention
}

// pruneRecord is a prune's audit record, its ages (nil when unreadable)
// and what it deleted.
type pruneRecord struct {
	errandtype.AuditRecord
	Ages *pruneAges
	errandstore.PruneResult
}

// OwnKinds names the kinds the prune gave ages of their own, by name.
func (a *pruneAges) OwnKinds() []string { return slices.Sorted(maps.Keys(a.Kinds)) }

// In is the retention the prune applied to kind's jobs.
func (a *pruneAges) In(kind string) errandstore.KindRetention {
	return errandstore.RetentionOf(a.SucceededAge, a.DeadAge, a.Kinds, kind)
}

// kindRetention is a kind's ages in force; 0 keeps its jobs. Own: the
// kind has ages of its own.
type kindRetention struct {
	Kind string
	errandstore.KindRetention
	Own bool
}

// parsePruneAges reads the ages of a prune's details; nil when they hold
// none it can read.
func parsePruneAges(details json.RawMessage) *pruneAges {
	type ages struct {
		SucceededAge string `json:"succeeded_age"`
		DeadAge      string `json:"dead_age"`
	}
	var d struct {
		ages
		Kinds map[string]ages `json:"kinds"`
	}
	if json.Unmarshal(details, &d) != nil {
		return nil
	}
	parse := func(a ages) (errandstore.KindRetention, bool) {
		s, err1 := time.ParseDuration(a.SucceededAge)
		dd, err2 := time.ParseDuration(a.DeadAge)
		return errandstore.KindRetention{SucceededAge: s, DeadAge: dd}, err1 == nil && err2 == nil
	}
	def, ok := parse(d.ages)
	if !ok {
		return nil
	}
	p := &pruneAges{SucceededAge: def.SucceededAge, DeadAge: def.DeadAge, Kinds: map[string]errandstore.KindRetention{}}
	for k, a := range d.Kinds {
		if p.Kinds[k], ok = parse(a); !ok {
			return nil
		}
	}
	return p
}

// kindRetentions lists the retention in force for each kind with ages of
// its own, by name, then for each other kind of seen, by name.
func kindRetentions(succeeded, dead time.Duration, own map[string]errandstore.KindRetention, seen []string) []kindRetention {
	var out []kindRetention
	for _, k := range slices.Sorted(maps.Keys(own)) {
		out = append(out, kindRetention{Kind: k, KindRetention: errandstore.RetentionOf(succeeded, dead, own, k), Own: true})
	}
	for _, k := range seen {
		if _, ok := own[k]; !ok {
			out = append(out, kindRetention{Kind: k, KindRetention: errandstore.RetentionOf(succeeded, dead, own, k)})
		}
	}
	return out
}

func (d *dashboard) retentionPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data, err := d.loadRetention(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.newPage(r, "Retention", "retention", now, true)
	p.Data = data
	d.render(w, http.StatusOK, "retention", p)
}

func (d *dashboard) loadRetention(ctx context.Context) (*retentionData, error) {
	prunes, err := d.c.Audit(ctx, &errand.AuditOpts{Action: errandtype.AuditPrune, Limit: retentionPrunes})
	if err != nil {
		return nil, err
	}
	ins, err := d.c.Insights(ctx, nil)
	if err != nil {
		return nil, err
	}
	var seen []string
	for _, k := range ins.Kinds {
		seen = append(seen, k.Kind)
	}
	slices.Sort(seen)
	data := &retentionData{Configured: d.opts.Retention}
	for _, rec := range prunes {
		pr := pruneRecord{AuditRecord: rec, Ages: parsePruneAges(rec.Details)}
		_ = json.Unmarshal(rec.Details, &pr.PruneResult) // unreadable counts show as 0
		data.Prunes = append(data.Prunes, pr)
	}
	if len(data.Prunes) > 0 {
		data.Last = data.Prunes[0].Ages
	}
	switch c := data.Configured; {
	case c != nil:
		data.Source = "configured"
		data.Kinds = kindRetentions(c.SucceededAge, c.DeadAge, c.Kinds, slices.Compact(seen))
	case data.Last != nil:
		data.Source = "last prune"
		data.Kinds = kindRetentions(data.Last.SucceededAge, data.Last.DeadAge, data.Last.Kinds, slices.Compact(seen))
	}
	return data, nil
}
