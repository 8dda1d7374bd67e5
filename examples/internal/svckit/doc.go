// Package svckit holds what the example services (room-service and
// activity-service) share in how they are configured and started: a
// strict YAML decoder whose errors name the key, secrets read from the
// environment or from the files *_FILE variables name, and a MySQL pool
// that waits for its server. It is the examples' own, not the library's.
package svckit
