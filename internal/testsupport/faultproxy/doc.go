// Package faultproxy is a TCP proxy for tests that puts network faults
// between one client and one server: a blackhole (peers stay connected but
// nothing arrives, as when a network silently drops packets), resets, and a
// delay (a slow link: every byte arrives late, in order).
//
// A blackhole is what a client's keepalive exists for: its pings go
// unanswered until it declares the connection dead, and every new dial is
// accepted at TCP level and then just as silent, so the client makes no
// progress at all until Pass. A userspace proxy cannot drop TCP segments
// themselves: the client's kernel still gets ACKs, so only application-level
// keepalives (HTTP/2 and gRPC pings), not TCP_USER_TIMEOUT, notice.
//
// Each direction is a plain byte stream: when one side closes or fails, the
// proxy closes both sides (no half-close).
package faultproxy
