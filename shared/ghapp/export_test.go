package ghapp

// RefusalHold is refusalHold, for the tests that move the clock across it.
const RefusalHold = refusalHold
