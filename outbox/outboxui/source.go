package outboxui

import (
	"context"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Outbox is what the dashboard shows and requeues through: one outbox
// with its named consumers, by the operator contract (backend.Outbox).
// A *mysql.Store (store/mysql) is one, and so is the in-memory store of
// outbox/outboxtest.
type Outbox = backend.Outbox

// Queue is one consumer's delivery state (backend.Queue): a
// *mysql.Store, a *mysql.ConsumerStore.
type Queue = backend.Queue

// consumerNames lists the named consumers of ob that are not being
// removed, by name.
func consumerNames(ctx context.Context, ob Outbox) ([]string, error) {
	infos, err := ob.Consumers(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(infos))
	for _, c := range infos {
		if !c.Removing {
			names = append(names, c.Name)
		}
	}
	return names, nil
}
