// Package logbuf is a bounded asynchronous writer for logs on a stream that
// may stall, such as a stderr pipe whose reader hangs.
//
// What it promises: Write never waits on the stream. Lines are queued, up to
// a byte limit, and written in order by one goroutine; when the queue is full
// a line is dropped and counted, and once the stream takes writes again a
// notice says, where the lines went missing, how many were dropped. Flush
// waits for the queue to drain, but never longer than it is told.
//
// What it does not promise: delivery. A stream that never drains keeps what
// was queued, and a process that exits loses it.
//
// It never sets O_NONBLOCK on the stream: on an inherited stderr the file
// description is shared with other processes (etcdlead's child), which would
// then see EAGAIN where they expect a write to block.
//
// It runs in the supervisor and in each keeper process.
package logbuf
