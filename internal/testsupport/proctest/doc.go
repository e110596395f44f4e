// Package proctest is test support for processes and their output: what
// /proc says of a process, a cleanup that can never hit a reused pid, and
// pipes full to the brim, as a stalled log reader leaves them. The
// supervisor's, the log buffer's and the end-to-end tests share it.
package proctest
