package chaos

import (
	"os"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// One moto_server for the whole binary: the sequential tests would start one each.
func TestMain(m *testing.M) { os.Exit(emulator.RunTests(m)) }
