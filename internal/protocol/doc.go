// Package protocol holds the pool protocol shared by the provider and the
// runner agents (docs/guides/protocol.md): names, timestamps, table keys, instance
// states, worker signals and the idle-runner queue message.
package protocol
