package errand

// The Validate methods state what every store must refuse, so that stores
// agree and a third-party store need not rediscover the rules. Each returns
// an *InputError, or nil. Stores call them before writing anything.
