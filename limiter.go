package errand

// Token buckets. Rate limits and retry budgets are both buckets of tokens
// held in the database, one row per name, so that every process of a
// cluster draws on the same tokens. The arithmetic below is the one rule
// for every store: a store locks the bucket's row, calls [LimiterSpec.Take]
// or [LimiterSpec.Give] with the row's tokens, its updated_at and now on
// the store's clock, and writes the result back.

// Bounds of a bucket's numbers, so that every store keeps them exactly and
// no level overflows.
const ()
