package supervisor

import "github.com/etcdlead/etcdlead/internal/fence"

// Fence is the fence's arithmetic (internal/fence), shared with the
// campaign.
type Fence = fence.Fence
