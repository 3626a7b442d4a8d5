package ghapp_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// TestRefusedExchangeOfAStarterThatGaveUpIsAWaitersOwn: the caller that
// started a token exchange gives up (its context ends) while three others
// wait for it; GitHub refuses the exchange (installation suspended). The
// exchange reached GitHub, so exactly one waiter meets the refusal as its
// own answer (one attempt, one app_refused) and the others held; with
// every waiter handed it held, nobody counted it.
func TestRefusedExchangeOfAStarterThatGaveUpIsAWaitersOwn(t *testing.T) {
	t.Parallel()
	pemBytes, pub := testKey(t)
	synctest.Test(t, func(t *testing.T) {
		fake := ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(pub))
		fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
		fake.Suspend(inst)
		c, release, _ := heldExchanges(t, fake, pemBytes)
		starter, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() {
			_, err := c.JobStatus(starter, inst, "octo", "hello", 7)
			first <- err
		}()
		synctest.Wait() // the starter's exchange is in flight
		const waiters = 3
		errs := make(chan error, waiters)
		for range waiters {
			go func() {
				_, err := c.JobStatus(context.Background(), inst, "octo", "hello", 7)
				errs <- err
			}()
		}
		synctest.Wait()
		cancel()
		<-first // the starter gave up
		close(release)
		own := 0
		for range waiters {
			if fl := failure.Classify(<-errs); fl.AppRefused && !fl.Remembered {
				own++
			}
		}
		if own != 1 {
			t.Errorf("%d of %d waiters met the refused exchange as their own answer, want 1: its starter gave up, and the one request GitHub refused is one attempt", own, waiters)
		}
		time.Sleep(ghapp.DefaultTimeout)
	})
}
