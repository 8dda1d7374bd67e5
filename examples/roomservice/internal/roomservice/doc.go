// Package roomservice is room-service: a small live-room backend and the
// outbox's first user.
//
// A room command (create, join, leave, gift) arrives over HTTP with a
// command ID, and one MySQL transaction changes the room's state, records
// the command (so that a retry of the same ID replays its first answer)
// and writes its events to the room_outbox table:
//
//	create  RoomCreated
//	join    RoomUserJoined, RoomHeatChanged
//	leave   RoomUserLeft, RoomHeatChanged
//	gift    RoomGiftSent, RoomHeatChanged, RoomRankChanged
//
// Right after the commit the events are published to the sink (Tencent
// Cloud IM by default; see Config). A failure there never fails the
// command: the event stays pending and the outbox worker delivers it
// later, retrying by the outbox_worker block's policy. Delivery is
// at-least-once; receivers deduplicate by the envelope's event_id.
// Optionally (the nats block) a second, named consumer of room_outbox
// relays every event to NATS JetStream as well, for activity-service.
//
// The App wires MySQL, the store, the worker, the sink, the public API
// and the admin listener (/metrics, the probes, the outbox dashboard),
// and runs them in the examples' shared shell (package svckit), which
// drains in a fixed order on SIGTERM. The configuration is a YAML file
// and the environment (EnvSettings); secrets never appear in its
// printouts.
package roomservice
