package claim

// SoonAfter lends the infrastructure-error wait to the external tests.
var SoonAfter = soonAfter
