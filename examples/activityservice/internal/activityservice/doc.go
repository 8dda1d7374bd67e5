// Package activityservice is activity-service: the consuming side of the
// outbox, and its second user.
//
// room-service relays its events to NATS JetStream (its nats block: a
// named consumer of room_outbox delivering through sink/natsjs). This
// service reads them with a durable pull consumer and explicit acks, and
// applies each through an inbox (inbox/mysql) in its own database, in
// the transaction that records the event ID:
//
//	RoomCreated     activity_rooms.owner_id; the owner's rooms_created
//	RoomUserJoined  the user's joins; rooms_joined once per room
//	RoomUserLeft    the user's leaves
//	RoomGiftSent    the sender's gifts, items and points sent; the room's
//	                gifts (received by its owner, summed when read); a
//	                UserLevelUp per threshold (Config.Levels) crossed
//	RoomHeatChanged, RoomRankChanged: acknowledged, counted, not recorded
//
// A message is acknowledged only after its transaction has committed.
// A redelivery (an instance killed before its ack, a lost ack, an
// outbox that published twice) finds its ID in the inbox and changes
// nothing; a failure (the database is down) asks for the message again
// after rooms.retry_delay; an instance killed with messages in hand gets
// them back after rooms.ack_wait. A message that can never be applied
// (an unknown event type, a malformed payload) is acknowledged, counted
// (activity_deliveries_total) and logged, never retried for ever.
//
// UserLevelUp events go out through an outbox of the service's own (the
// activity_outbox table, written in the same transaction) and its worker,
// to another JetStream stream (outbox.stream, subjects
// <outbox.subject_prefix>.UserLevelUp.<user_id>).
//
// Limits: the effects are exactly once within inbox.retention (7 days by
// default); an event redelivered after its ID was purged would be applied
// again. Every write goes to this service's one database.
package activityservice
