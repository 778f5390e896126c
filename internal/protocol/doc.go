// Package protocol holds the pool protocol shared by the provider and the
// runner agents (see PROTOCOL.md): names, timestamps, table keys, instance
// states, worker signals and the idle-runner queue message.
package protocol
