package errandstore

import "github.com/errandhq/errand/errandtype"

// maxSpecBytes bounds a schedule's spec as stored (ScheduleUpsertParams).
const MaxSpecBytes = errandtype.MaxNameBytes * 2
