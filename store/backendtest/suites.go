package backendtest

// The suites' entry points, each with its table of tests: a test's name is
// its subtest's, which CI's -run patterns name.

import (
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/conformance"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// RunStoreTests checks every promise of the backend.Store contract against
// the store newHarness makes. Each subtest gets its own harness and runs in
// parallel with the others.
func RunStoreTests(t *testing.T, newHarness Factory) {
	conformance.Run(t, newHarness, storeTests)
}

// storeTests are the tests of RunStoreTests.
var storeTests = []conformance.Test[Harness]{
	{Name: "EnqueueCommitIsVisible", Fn: testEnqueueCommit},
	{Name: "EnqueueRollbackLeavesNothing", Fn: testEnqueueRollback},
	{Name: "UncommittedIsNotClaimable", Fn: testUncommittedNotClaimable},
	{Name: "DuplicateIDRejected", Fn: testDuplicateID},
	{Name: "InvalidMessageRejectedAtomically", Fn: testInvalidMessage},
	{Name: "GetUnknownIsNotFound", Fn: testGetNotFound},
	{Name: "ClaimRespectsLimit", Fn: testClaimLimit},
	{Name: "ClaimInEnqueueOrder", Fn: testClaimOrder},
	{Name: "LeaseHidesRecord", Fn: testLeaseHides},
	{Name: "LeaseExpiryAllowsReclaim", Fn: testLeaseExpiry},
	{Name: "SettleIsFencedByToken", Fn: testSettleFenced},
	{Name: "SettlePublished", Fn: testSettlePublished},
	{Name: "SettleRetrySchedulesNextAttempt", Fn: testSettleRetry},
	{Name: "SettleDead", Fn: testSettleDead},
	{Name: "SettleRelease", Fn: testSettleRelease},
	{Name: "SettleTruncatesLastError", Fn: testSettleTruncates},
	{Name: "SettleIsIdempotent", Fn: testSettleIdempotent},
	{Name: "HeadStartDelaysWorkers", Fn: testHeadStart},
	{Name: "ClaimByIDs", Fn: testClaimByIDs},
	{Name: "ConcurrentClaimsAreDisjoint", Fn: testConcurrentClaims},
	{Name: "ClaimParamsValidated", Fn: testClaimValidation},

	// Ordered claims (ordered_suite.go).
	{Name: "OrderedClaimsOnlyKeyHeadsAndUnkeyed", Fn: testOrderedHeads},
	{Name: "OrderedFailingHeadHoldsOnlyItsKey", Fn: testOrderedFailingHead},
	{Name: "OrderedDeadHeadReleasesItsKey", Fn: testOrderedDeadHead},
	{Name: "OrderedClaimByIDsNeedsTheKeyHead", Fn: testOrderedIDs},
	{Name: "OrderedClaimsVisitEveryKey", Fn: testOrderedFairness},
	{Name: "OrderedClaimNeverReturnsARecordTwice", Fn: testOrderedNoRepeats},
	{Name: "OrderedRequeuedDeadLetterWaitsForItsKeyInFlight", Fn: testOrderedRequeueWaits},
	{Name: "OrderedTakeOverInPartsKeepsTheRestBack", Fn: testOrderedTakeOverInParts},
	{Name: "OrderedTakeOverOfTheRestWaitsForAFailedFirstPart", Fn: testOrderedTakeOverOfTheRestWaits},
	{Name: "OrderedProbeTakingOverADeadRangeKeepsKeyOrder", Fn: testOrderedProbeTakeOverKeepsKeyOrder}, // worker_suite.go

	// A claim that settles the previous batch, and what a claim leaves
	// (ordered_suite.go: both check ordered claims too).
	{Name: "ClaimSettlesThePreviousBatchInItsTransaction", Fn: testClaimWithSettle},
	{Name: "ClaimSaysWhenDueWorkIsLeft", Fn: testClaimMore},

	// No committed message is passed over, whatever the order in which
	// writers commit: a store that reads its outbox past a position (a log)
	// must not move that position past a message whose transaction is still
	// open, nor stall for good behind one that rolled back (noskip_suite.go).
	{Name: "LateCommitIsNotSkipped", Fn: testLateCommitNotSkipped},
	{Name: "RolledBackMessagesDoNotStallTheRest", Fn: testRolledBackDoesNotStall},
	{Name: "NoSkipUnderConcurrentWriters", Fn: testNoSkipConcurrentWriters},
}

// RunWorkerTests checks the worker's promises (delivery, retries, the
// after-commit path), and the worker's behaviour under failures and
// concurrency, through a real outbox.Worker on the store newHarness makes.
//
// Whether a stopped worker leaves a goroutine behind is checked by
// RunLeakTest, which cannot run beside other tests.
func RunWorkerTests(t *testing.T, newHarness Factory) {
	conformance.Run(t, newHarness, workerTests)
}

// workerTests are the tests of RunWorkerTests.
var workerTests = []conformance.Test[Harness]{
	{Name: "RepublishMarksPublished", Fn: testRepublish},
	{Name: "FailureKeepsPendingWithRetryCount", Fn: testFailureKeepsPending},
	{Name: "FailThenSucceedEndsPublished", Fn: testFailThenSucceed},
	{Name: "SyncSuccessMarksPublishedAndWorkerSkipsIt", Fn: testSyncSuccess},
	{Name: "SyncFailureLeavesPendingRetryCountUnchanged", Fn: testSyncFailure},
	{Name: "CancelStopsNewBatchesInFlightBoundedByPublishTimeout", Fn: testCancel},
	{Name: "StopDuringAClaimIsNotAFailure", Fn: testStopDuringClaim},
	{Name: "NoOpSinkSuccessMarksPublished", Fn: testNoOpSink},
	{Name: "FailingAndPanickingRecordsDoNotStopTheBatch", Fn: testBatchIsolation},
	{Name: "StoreErrorEndsRoundNextRoundRetries", Fn: testStoreErrors},
	{Name: "BatchSizeBoundsARound", Fn: testBatchSize},
	{Name: "RunTwiceIsRefused", Fn: testRunTwice},
	{Name: "LogFields", Fn: testLogFields},
	{Name: "PublishNowWithRunningWorkerDeliversOnce", Fn: testPublishNowOnce},
	{Name: "PublishNowFailingSinkWorkerDeliversLater", Fn: testPublishNowFailing},
	{Name: "ThreeWorkersFlakySinkNoLossNoDuplicate", Fn: testThreeWorkers},
	{Name: "CrashedWorkerRecordsDeliveredAfterLease", Fn: testCrashedWorker},

	// Dead letters and per-key ordering (delivery_suite.go).
	{Name: "PermanentErrorIsADeadLetterAndTheHookFires", Fn: testPermanentIsDead},
	{Name: "MaxAttemptsEndsInADeadLetter", Fn: testMaxAttemptsDead},
	{Name: "PanickingDeadHookDoesNotStopTheWorker", Fn: testDeadHookPanics},
	{Name: "OrderingThreeWorkersFailingHeadsHoldOnlyTheirKeys", Fn: testOrderingThreeWorkers},
	{Name: "OrderingPublishNowStopsAKeyAtItsFirstFailure", Fn: testOrderingPublishNow},

	// What operators see: stats, observer events and retention; stats and
	// retention apply to stores that implement backend.StatsReader and
	// backend.Purger (ops_suite.go).
	{Name: "StatsCountTheBacklog", Fn: testStats},
	{Name: "ObserverSeesEveryOutcome", Fn: testObserver},
	{Name: "RetentionDeletesOnlyOldPublishedRecords", Fn: testRetention},

	// Concurrent publishing, wake-ups and carried settlements
	// (delivery_suite.go).
	{Name: "ConcurrencyKeepsEachKeyInOrder", Fn: testConcurrency},
	{Name: "NotifyWakesTheWorker", Fn: testNotify},
	{Name: "FullBatchOutcomesAreRecordedByTheNextClaim", Fn: testCarriedSettle},
	{Name: "OrderedWorkerKeepsUpWithFewKeys", Fn: testOrderedKeepsUp},

	// PublishNow, the after-commit publish a request waits for (issue 28:
	// defects 2 and 11; aftercommit_suite.go).
	{Name: "OrderedPublishNowLeavesALaterMessageDue", Fn: testOrderedPublishNowLeavesLaterDue},
	{Name: "PublishNowSinkCallBoundedByAfterCommitTimeout", Fn: testAfterCommitTimeout},
	{Name: "PublishNowHoldsOffAFailingSink", Fn: testPublishNowHoldsOff},
	{Name: "ADecoratedStoreKeepsItsFastPaths", Fn: testDecoratedStoreKeepsFastPaths},

	// A worker that holds off a failing sink (outbox.SinkBreaker; issue 37,
	// defect 7; aftercommit_suite.go).
	{Name: "HeldOffRetryableSinkIsOnlyProbed", Fn: func(t *testing.T, h Harness) {
		testHeldOffSinkOnlyProbed(t, h, outboxtest.ErrInjected, holdOffFailures)
	}},
	{Name: "HeldOffUnavailableSinkIsOnlyProbed", Fn: func(t *testing.T, h Harness) {
		testHeldOffSinkOnlyProbed(t, h, outbox.Unavailable(outboxtest.ErrInjected), 1)
	}},
}

// RunAdversarialTests checks the store and the worker with hostile but
// legal inputs: error texts and panic values that are not valid UTF-8,
// huge or full of control characters; keys that sort and compare
// awkwardly; leases lost while a sink hangs; and a run of several
// workers, with Ordering on and off, that mixes all of it and requires
// every accepted message to end published or dead, the others
// untouched, no duplicate without a lost lease, and per-key order.
func RunAdversarialTests(t *testing.T, newHarness Factory) {
	conformance.Run(t, newHarness, adversarialTests)
}

// adversarialTests are the tests of RunAdversarialTests.
var adversarialTests = []conformance.Test[Harness]{
	{Name: "SettleStoresAnyErrorTextValidAndBounded", Fn: testSettleHostileTexts},
	{Name: "ClaimWithACarriedSettleOfHostileTexts", Fn: testCarriedHostileSettle},
	{Name: "HostileErrorsAndPanicsNeverStallABatch", Fn: testHostileErrorsNeverStall},
	{Name: "OrderedClaimsDeliverEveryKeyInOrder", Fn: testOrderedHostileKeys},
	{Name: "DeadIsReportedOnlyWhenRecorded", Fn: testDeadOnlyWhenRecorded},
	{Name: "StatsDoNotCountExpiredLeases", Fn: testStatsExpiredLeases},
	{Name: "RunUnordered", Fn: func(t *testing.T, h Harness) { testAdversarialRun(t, h, false) }},
	{Name: "RunOrdered", Fn: func(t *testing.T, h Harness) { testAdversarialRun(t, h, true) }},
}

// RunOperatorTests checks the operator contract (backend.Queue, and
// backend.Outbox where the harness's store is one): what the dashboard,
// outboxctl and outboxprom need of a store. Every store the tools should
// work on runs it.
func RunOperatorTests(t *testing.T, newHarness Factory) {
	conformance.Run(t, newHarness, operatorTests)
}

// operatorTests are the tests of RunOperatorTests.
var operatorTests = []conformance.Test[Harness]{
	{Name: "ListFiltersAndPages", Fn: testListFiltersAndPages},
	{Name: "ListRefusesBadFilters", Fn: testListRefusesBadFilters},
	{Name: "RequeueOneDeadLetter", Fn: testRequeueOne},
	{Name: "RequeueDeadByFilterCountsAndBounds", Fn: testRequeueDeadByFilter},
	{Name: "RequeuedRecordWaitsOnlyForItsKeyInFlight", Fn: testRequeueWaitsForKeyInFlight},
	{Name: "OutboxNamesItselfAndItsConsumers", Fn: testOutboxAndConsumers},
}

// RunConsumerTests checks the consumer contract: every consumer of an
// outbox gets every message; status, attempts, errors, leases, fencing,
// dead letters and per-key order are each consumer's own, so one
// consumer's failures never hold up another. Every consumer's store
// must also pass RunStoreTests and RunWorkerTests on its own.
func RunConsumerTests(t *testing.T, newHarness func(t *testing.T) ConsumerHarness) {
	conformance.Run(t, newHarness, consumerTests)
}

// consumerTests are the tests of RunConsumerTests.
var consumerTests = []conformance.Test[ConsumerHarness]{
	{Name: "EveryConsumerGetsEveryMessage", Fn: testEveryConsumerGetsEveryMessage},
	{Name: "StateIsPerConsumer", Fn: testStateIsPerConsumer},
	{Name: "LeasesAndFencingArePerConsumer", Fn: testLeasesArePerConsumer},
	{Name: "OrderIsHeldPerConsumer", Fn: testOrderIsHeldPerConsumer},
	{Name: "HeadStartIsTheEnqueuingConsumers", Fn: testHeadStartIsTheEnqueuingConsumers},
}
