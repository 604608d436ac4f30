package errand

const ()
