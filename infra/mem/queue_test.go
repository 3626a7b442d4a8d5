package mem_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/mem"
)

func TestQueueContract(t *testing.T) {
	contract.TestQueue(t, func(*testing.T) contract.QueueWorld {
		q := mem.NewQueue(func() time.Time { return contract.T0 })
		return contract.QueueWorld{
			Queue: q,
			Sent: func() []contract.Sent {
				var out []contract.Sent
				for _, s := range q.Sent() {
					out = append(out, contract.Sent{Msg: s.Msg, Delay: s.Delay})
				}
				return out
			},
			Receipt: func(*testing.T) string { return "receipt-1" },
		}
	})
}
