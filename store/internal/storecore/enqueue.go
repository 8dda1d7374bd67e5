package storecore

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// HeadStart returns the head start Enqueue's opts ask for (none for nil
// opts), refusing a negative one; what prefixes the error.
func HeadStart(what string, opts *backend.EnqueueOptions) (time.Duration, error) {
	if opts == nil {
		return 0, nil
	}
	if opts.HeadStart < 0 {
		return 0, fmt.Errorf("%s: enqueue: HeadStart %v: must not be negative", what, opts.HeadStart)
	}
	return opts.HeadStart, nil
}

// CheckMessages checks the messages of one Enqueue before anything is
// written: each must be valid (outbox.Message.Validate) and pass the
// database's own rule (nil for none), and no ID may appear twice. The
// errors wrap outbox.ErrInvalidMessage or outbox.ErrDuplicateID; what
// prefixes them.
func CheckMessages(what string, msgs []outbox.Message, rule func(outbox.Message) error) error {
	seen := make(map[string]struct{}, len(msgs))
	for i, m := range msgs {
		err := m.Validate()
		if err == nil && rule != nil {
			err = rule(m)
		}
		if err != nil {
			return fmt.Errorf("%s: enqueue: message %d: %w", what, i, err)
		}
		if _, dup := seen[m.ID]; dup {
			return fmt.Errorf("%s: enqueue: message ID %q appears twice: %w", what, m.ID, outbox.ErrDuplicateID)
		}
		seen[m.ID] = struct{}{}
	}
	return nil
}

// CheckIDs refuses a call (op, such as "end head start") on more IDs
// than backend.MaxClaimLimit; what prefixes the error.
func CheckIDs(what, op string, ids []string) error {
	if len(ids) > backend.MaxClaimLimit {
		return fmt.Errorf("%s: %s: %d IDs: more than %d", what, op, len(ids), backend.MaxClaimLimit)
	}
	return nil
}

// CheckEndHeadStart checks the ids of an EndHeadStart
// (backend.HeadStartEnder): it reports whether there is anything to do,
// and refuses more IDs than backend.MaxClaimLimit; what prefixes the
// error.
func CheckEndHeadStart(what string, ids []string) (bool, error) {
	if err := CheckIDs(what, "end head start", ids); err != nil {
		return false, err
	}
	return len(ids) > 0, nil
}

// CheckHeadStartBatch checks the arguments of HeadStartBatch and
// OrderedHeadStartBatch (backend.HeadStartLeaser); what prefixes the
// error.
func CheckHeadStartBatch(what string, ids []string, minLeft time.Duration) error {
	if err := CheckIDs(what, "head start batch", ids); err != nil {
		return err
	}
	if minLeft < 0 {
		return errors.New(what + ": head start batch: minLeft must not be negative")
	}
	return nil
}
