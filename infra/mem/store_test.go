package mem_test

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
)

func TestStoreContract(t *testing.T) {
	contract.TestStore(t, 1000, func(*testing.T) contract.Store { return mem.NewStore(job.Timing{}) })
}

func TestRedeliveryStoreContract(t *testing.T) {
	contract.TestRedeliveryStore(t, "mem", func(*testing.T) contract.RedeliveryStore { return mem.NewStore(job.Timing{}) })
}
