package supervisor

// Supported reports whether this platform keeps the promise: Linux does.
func Supported() error { return nil }
