package errand
