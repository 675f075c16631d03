package mcpserver

// NewCached is newServer, for the benchmark.
var NewCached = newServer
