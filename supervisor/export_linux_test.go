package supervisor

import "time"

// moveFenceTo sets the supervisor's own fence to deadline d, earlier or
// later, as only a test may: its keeper, stopped, hears nothing.
func (c *Child) moveFenceTo(d time.Duration) {
	c.mu.Lock()
	c.fence.Deadline = d
	c.mu.Unlock()
	select {
	case c.moved <- struct{}{}:
	default:
	}
}
